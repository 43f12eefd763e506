"""The two small languages of the CLI: kubectl's label selectors and JSONPath templates."""

from __future__ import annotations

import pytest

from cli import jsonpath
from cli.selector import parse_selector


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ("env=prod", {"env": "prod"}, True),
        ("env==prod", {"env": "dev"}, False),
        ("env!=prod", {}, True),  # a missing key satisfies != (as in kubectl)
        ("env!=prod", {"env": "prod"}, False),
        ("env in (prod, staging)", {"env": "staging"}, True),
        ("env notin (prod,staging)", {"env": "prod"}, False),
        ("env notin (prod)", {}, True),
        ("env", {"env": ""}, True),
        ("!env", {"env": "x"}, False),
        ("example.com/tier=db,env in (a,b)", {"example.com/tier": "db", "env": "b"}, True),
        ("example.com/tier=db,env in (a,b)", {"example.com/tier": "db", "env": "c"}, False),
    ],
)
def test_selector_matches_as_kubectl_does(
    selector: str, labels: dict[str, str], expected: bool
) -> None:
    assert parse_selector(selector).matches(labels) is expected


@pytest.mark.parametrize("text", ["", "env in prod", "env=a b", "=x", "env in ()", "a,,b"])
def test_bad_selectors_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_selector(text)


DATA = {
    "kind": "List",
    "items": [
        {"metadata": {"name": "east", "labels": {"a.b/c": "1"}}, "n": 2, "ok": True},
        {"metadata": {"name": "west", "labels": {}}, "n": 3, "ok": False},
    ],
}


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{.items[*].metadata.name}", "east west"),
        ("{.items[0].metadata.name}", "east"),
        ("{.items[-1].n}", "3"),
        ("{.items[1].ok}", "false"),
        ("{.items[0].metadata.labels['a.b/c']}", "1"),
        ('{range .items[*]}{.metadata.name}{"\\t"}{.n}{"\\n"}{end}', "east\t2\nwest\t3\n"),
        ("kind={.kind} first={$.items[0].metadata.name}", "kind=List first=east"),
        ("{.items[1].metadata.labels}", "{}"),
    ],
)
def test_jsonpath_templates(template: str, expected: str) -> None:
    assert jsonpath.render(jsonpath.parse(template), DATA) == expected


@pytest.mark.parametrize(
    "template", ["", "{.items", "{end}", "{range .items}", "{..name}", "{.items[?(@.n)]}",
                 "{items}"],
)
def test_bad_templates_are_refused_when_parsed(template: str) -> None:
    with pytest.raises(ValueError):
        jsonpath.parse(template)


def test_a_path_that_names_nothing_says_so() -> None:
    with pytest.raises(LookupError, match="'nope' is not found"):
        jsonpath.render(jsonpath.parse("{.items[0].nope}"), DATA)
