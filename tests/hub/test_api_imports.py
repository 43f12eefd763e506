"""`hub.api`'s modules import one another without a cycle, and each imports on its own.

The API's modules once imported each other in a circle (`deps` → `watch` → `deps`,
`errors` → `deps`, `params` → `errors`): it worked only while the modules happened to be
imported in one order, and a reader could not tell which module was the foundation. Now
`hub.api.status` is pure and `hub.api.deps` names open watches by a Protocol. Two checks
keep it so:

* every `import` statement of `hub.api` and `hub.app` — including those under
  `if TYPE_CHECKING:` and inside functions, which hide a cycle from the interpreter but
  not from a reader — forms a graph without a cycle;
* in a fresh interpreter, each module imports first, with no other `hub` module loaded
  (a cycle that the order of imports hid would fail here with a partly initialised
  module).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from tests.support.importfirst import failures_importing_each_first

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "hub.api"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def api_modules() -> dict[str, Path]:
    """Every module of `hub.api` (subpackages included) and `hub.app`, by name."""
    files = [*sorted((ROOT / "hub" / "api").rglob("*.py")), ROOT / "hub" / "app.py"]
    return {_module_name(path): path for path in files}


def _imported(node: ast.AST, current: str, is_package: bool) -> Iterator[str]:
    """The modules an import statement names (relative ones resolved against `current`)."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            anchor = current.split(".")
            anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
            base = ".".join([*anchor, base] if base else anchor)
        yield base
        for alias in node.names:
            yield f"{base}.{alias.name}"  # `from hub.api import deps` names a module


def import_graph(modules: Mapping[str, Path]) -> dict[str, set[str]]:
    """Module → the modules of `modules` it imports, wherever the statement stands."""
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        is_package = path.name == "__init__.py"
        graph[name] = {
            target
            for node in ast.walk(tree)
            for target in _imported(node, name, is_package)
            if target in modules and target != name
        }
    return graph


def find_cycle(graph: Mapping[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as a path that ends where it starts, or None."""
    done: set[str] = set()
    stack: list[str] = []
    on_stack: set[str] = set()

    def visit(node: str) -> list[str] | None:
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target in on_stack:
                return [*stack[stack.index(target) :], target]
            if target not in done:
                found = visit(target)
                if found:
                    return found
        stack.pop()
        on_stack.discard(node)
        done.add(node)
        return None

    for start in sorted(graph):
        if start not in done:
            found = visit(start)
            if found:
                return found
    return None


def test_the_cycle_finder_finds_a_cycle_hidden_under_type_checking(tmp_path: Path) -> None:
    """The check itself: a TYPE_CHECKING import back is a cycle, a one-way import is not."""
    (tmp_path / "a.py").write_text("from typing import TYPE_CHECKING\nimport b\n")
    (tmp_path / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import a\n"
    )
    (tmp_path / "c.py").write_text("import a\n")
    modules = {name: tmp_path / f"{name}.py" for name in ("a", "b", "c")}
    assert find_cycle(import_graph(modules)) == ["a", "b", "a"]
    (tmp_path / "b.py").write_text("import typing\n")
    assert find_cycle(import_graph(modules)) is None


def test_hub_api_has_no_import_cycle() -> None:
    graph = import_graph(api_modules())
    assert f"{PACKAGE}.status" in graph and f"{PACKAGE}.routes.exports" in graph
    assert find_cycle(graph) is None


def test_routers_live_in_hub_api_routes() -> None:
    """A module that defines an APIRouter is a route module, in `hub.api.routes`."""
    outside = [
        name
        for name, path in api_modules().items()
        if "APIRouter(" in path.read_text() and not name.startswith(f"{PACKAGE}.routes")
    ]
    assert outside == []


@pytest.mark.timeout(120)
def test_each_hub_api_module_imports_first_in_a_fresh_interpreter() -> None:
    assert failures_importing_each_first(sorted(api_modules())) == ""
