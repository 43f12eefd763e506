"""The hub store's modules import without a circle.

A circle among them (it was context → locks → feed → context) makes which module works
depend on which one a program happens to import first, and hides in function-level
imports. The feeds are cut into a write half (`hub.store.revisions`,
`hub.store.importchanges`) the transaction path needs and a read half (`hub.store.feed`,
`hub.store.importfeed`) that needs the store context; these tests keep it that way.
"""

from __future__ import annotations

import ast
from pathlib import Path

import hub.store
from tests.support.importfirst import failures_importing_each_first

STORE = Path(hub.store.__file__).parent
PACKAGE = "hub.store"
MODULES = sorted(
    PACKAGE if path.stem == "__init__" else f"{PACKAGE}.{path.stem}"
    for path in STORE.glob("*.py")
)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_imports(tree: ast.AST) -> set[str]:
    """The modules of `hub.store` a module imports when it runs: at its top and inside
    functions alike; not what it imports for the type checker alone."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for other in node.orelse:
                visit(other)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            # `from hub.store import codec` imports the module hub.store.codec.
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module in MODULES:
        path = STORE / ("__init__.py" if module == PACKAGE else f"{module.rsplit('.', 1)[1]}.py")
        imported = _runtime_imports(ast.parse(path.read_text(), filename=str(path)))
        # The package's own `__init__` is where the store is assembled; every module
        # importing a sibling runs it first, which is not an edge of the modules' design.
        graph[module] = {m for m in imported if m in MODULES and m not in (module, PACKAGE)}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of `graph`, as the path that closes it; None when there is none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def walk(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := walk(nxt)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := walk(node)) is not None:
            return found
    return None


def test_the_store_package_has_no_import_cycle() -> None:
    cycle = _cycle(_graph())
    assert cycle is None, "import cycle: " + " → ".join(cycle or [])


def test_the_cycle_finder_finds_a_circle() -> None:
    """The check above can fail: a circle through three modules is found."""
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_the_write_halves_import_nothing_of_the_read_halves() -> None:
    graph = _graph()
    readers = {f"{PACKAGE}.feed", f"{PACKAGE}.importfeed"}
    for writer in (f"{PACKAGE}.revisions", f"{PACKAGE}.importchanges", f"{PACKAGE}.locks"):
        seen: set[str] = set()
        todo = [writer]
        while todo:
            module = todo.pop()
            for nxt in graph[module] - seen:
                seen.add(nxt)
                todo.append(nxt)
        assert not seen & readers, f"{writer} reaches {sorted(seen & readers)}"


def test_each_store_module_imports_alone() -> None:
    """Imported first, with no other module of the project loaded, each module loads: none
    depends on another having been imported before it."""
    modules = [m for m in MODULES if m != PACKAGE]
    assert failures_importing_each_first(modules) == ""
