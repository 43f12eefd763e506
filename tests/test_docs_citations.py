"""The project stands on its own (docs/reference.md#cli): what it ships cites only itself.

Code comments, docstrings, help texts, errors, charts and docs point at the project's own
reference (`docs/reference.md#<anchor>`), never at a document outside the repository: no
specification kept beside it, no sibling directory, no tracker issue number in a comment or
docstring of shipped code. And every `docs/…md#anchor` written anywhere in the repository,
and every relative link between the docs, lands on a heading that exists — so a renamed
heading breaks the build instead of a reader's link.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import tokenize
from collections.abc import Iterator
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SELF = Path(__file__).resolve().relative_to(REPO).as_posix()
SHIPPED_DIRS = ("hub", "member", "cli", "shared", "sandbox", "helm", "docs", "migrations",
                "bench")
SHIPPED_FILES = ("README.md", "pyproject.toml")
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".tpl", ".json", ".js", ".toml", ".txt",
                 ".html", ".css", ".sh", ".mako", ".cfg", ".ini"}
# The sections other docs, code and help texts cite; each is a `## ` heading of the reference.
REFERENCE_ANCHORS = (
    "rest-api", "change-feeds", "conditions", "annotations", "labels", "flags", "conflicts",
    "export-path", "import-path", "cluster-selection", "cluster-properties",
    "scope-and-limits", "credentials", "failover", "ha-postgresql", "fleet-scale",
    "observability", "sandbox", "console", "cli",
)

# The outside contract, by name: "SPEC §2.8", "the SPEC's", "SPEC.md". `SPEC_COLUMNS` and
# `…_SPEC_HASH` are identifiers (word characters around), and "(needs SPEC)" is a version
# specifier in shared/entrypoints.py, not the document.
OUTSIDE_SPEC = re.compile("(?<![\\w])" + "SPEC" + r"(?![\w)])")
SPEC_FILE = re.compile(r"\b" + "SPEC" + r"\.md\b")
SIBLING = re.compile(r"\.\./" + "shared/")
# A bare "§2.8" cites the outside contract too; "docs/benchmarks.md §7" and
# "RFC 9110 §10.2.3" cite a section of something that is there.
SECTION = re.compile("\u00a7" + r"\s?\d")
SECTION_OWNERS = re.compile(r"benchmarks|RFC \d+")
ISSUE = re.compile(r"\b[Ii]ssues? #?\d+")
DOC_ANCHOR = re.compile(r"\bdocs/([\w./-]+\.md)#([\w-]+)")
MD_LINK = re.compile(r"\]\((?!https?:|mailto:)([^)\s#]*\.md)?#([^)\s]+)\)")


@cache
def tracked() -> tuple[str, ...]:
    """The repository's files as git knows them (a fresh checkout's view of it)."""
    names = subprocess.run(["git", "-C", str(REPO), "ls-files"], capture_output=True,
                           text=True, check=True).stdout.split("\n")
    return tuple(n for n in names if n and (REPO / n).is_file())


def text_files(*, shipped_only: bool) -> Iterator[tuple[str, str]]:
    for name in tracked():
        if name == SELF or Path(name).suffix not in TEXT_SUFFIXES:
            continue
        top = name.split("/", 1)[0]
        shipped = top in SHIPPED_DIRS or name in SHIPPED_FILES
        if shipped_only and not shipped:
            continue
        if not shipped and top != "tests":
            continue
        try:
            yield name, (REPO / name).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue


def offenders(pattern: re.Pattern[str], name: str, text: str,
              allowed: re.Pattern[str] | None = None) -> list[str]:
    found = []
    for match in pattern.finditer(text):
        if allowed is not None and allowed.search(text[max(0, match.start() - 45):match.start()]):
            continue
        row = text.count("\n", 0, match.start()) + 1
        line = text.split("\n")[row - 1].strip()
        found.append(f"{name}:{row}: {line[:120]}")
    return found


def show(found: list[str]) -> str:
    return f"{len(found)} found:\n" + "\n".join(found[:40])


def test_nothing_cites_the_outside_specification() -> None:
    found: list[str] = []
    for name, text in text_files(shipped_only=False):
        found += offenders(OUTSIDE_SPEC, name, text)
        found += offenders(SPEC_FILE, name, text)
        if name != "docs/benchmarks.md":  # its own sections: "§7", "§1's fifth round"
            found += offenders(SECTION, name, text, allowed=SECTION_OWNERS)
    assert not found, "cite docs/reference.md#<anchor> instead: " + show(found)


def test_shipped_files_name_no_directory_beside_the_repository() -> None:
    found: list[str] = []
    for name, text in text_files(shipped_only=True):
        found += offenders(SIBLING, name, text)
    assert not found, show(found)


def prose(name: str, text: str) -> Iterator[tuple[int, str]]:
    """(row, text) of the comments and docstrings of a code file."""
    if name.endswith(".py"):
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                yield token.start[0], token.string
            elif token.type == tokenize.STRING and \
                    token.string.lstrip("rbuRBUfF")[:3] in ('"""', "'''"):
                for k, line in enumerate(token.string.split("\n")):
                    yield token.start[0] + k, line
        return
    comment = "//" if name.endswith(".js") else "#"
    for row, line in enumerate(text.split("\n"), 1):
        if name.endswith(".tpl"):  # {{/* … */}} blocks: nearly every line of a helper file
            yield row, line
        elif comment in line:
            yield row, line[line.index(comment):]


def test_shipped_code_comments_and_docstrings_cite_no_tracker_issue() -> None:
    """The tracker is not shipped: say what the code does and why, not which issue asked."""
    found = []
    for name, text in text_files(shipped_only=True):
        if name.endswith(".md") or name.endswith(".json"):
            continue
        for row, line in prose(name, text):
            if ISSUE.search(line):
                found.append(f"{name}:{row}: {line.strip()[:120]}")
    assert not found, show(found)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


@cache
def anchors(doc: str) -> frozenset[str]:
    """Every heading anchor of the Markdown file `doc` (repository-relative)."""
    seen: dict[str, int] = {}
    out = set()
    fence = False
    for line in (REPO / doc).read_text(encoding="utf-8").split("\n"):
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        if fence or not re.match(r"#{1,6} ", line):
            continue
        base = slug(line.lstrip("#"))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return frozenset(out)


def test_the_reference_has_every_anchor_the_project_cites() -> None:
    headings = {slug(line[3:]) for line in
                (REPO / "docs/reference.md").read_text(encoding="utf-8").split("\n")
                if line.startswith("## ")}
    missing = [a for a in REFERENCE_ANCHORS if a not in headings]
    assert not missing, f"docs/reference.md lacks `## ` headings for {missing}"
    # Exactly these: a new section is a new anchor everyone may cite, so it is added here.
    assert headings == set(REFERENCE_ANCHORS), sorted(headings - set(REFERENCE_ANCHORS))


def links(name: str, text: str) -> Iterator[tuple[int, str, str]]:
    """(row, target doc, anchor) of every link into a doc that names an anchor."""
    for match in DOC_ANCHOR.finditer(text):
        yield text.count("\n", 0, match.start()) + 1, f"docs/{match[1]}", match[2]
    if not name.endswith(".md"):
        return
    fence = False
    for row, line in enumerate(text.split("\n"), 1):
        if line.lstrip().startswith("```"):
            fence = not fence
        if fence:
            continue
        for match in MD_LINK.finditer(line):
            target = match[1] or ""
            if target.startswith("docs/"):
                continue  # counted by DOC_ANCHOR above
            doc = name if not target else os.path.normpath(Path(name).parent / target)
            yield row, doc, match[2]


def test_every_link_into_the_docs_lands_on_a_heading() -> None:
    broken = []
    for name, text in text_files(shipped_only=False):
        for row, doc, anchor in links(name, text):
            if not (REPO / doc).is_file():
                broken.append(f"{name}:{row}: {doc} does not exist")
            elif anchor not in anchors(doc):
                broken.append(f"{name}:{row}: {doc} has no heading #{anchor}")
    assert not broken, show(broken)


def test_the_index_names_every_doc() -> None:
    index = (REPO / "docs/index.md").read_text(encoding="utf-8")
    docs = sorted(p.name for p in (REPO / "docs").glob("*.md") if p.name != "index.md")
    missing = [d for d in docs if d not in index]
    assert not missing, f"docs/index.md does not list {missing}"
