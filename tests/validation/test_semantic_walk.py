"""Semantic markers are checked wherever a schema can hold a value (issue item 4)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import pytest

from actionspace import Plan, Runtime
from actionspace._json_values import MAX_DEPTH
from actionspace.catalog import ToolSpec, spec_from_function
from actionspace.errors import ConfigurationError
from actionspace.validation.semantic import MARKER, Money, PathWithin, Timestamp, canonical_path
from actionspace.validation.validator import Validated, compile_tool, validate
from actionspace.validation.verdicts import Accepted, Rejected

ESCAPE = "../../../etc/passwd"


def _check(spec: ToolSpec, args: Any) -> Validated:
    return validate(compile_tool(spec), args, {}, None)


def _rejected_at(result: Validated) -> list[str]:
    assert isinstance(result.verdict, Rejected), result.verdict
    assert result.verdict.error.category == "invalid_arguments"
    return [e.path for e in result.verdict.error.field_errors]


def _path_spec(root: Path, annotation: Any) -> ToolSpec:
    def tool(arg: Any) -> None: ...

    tool.__annotations__ = {"arg": annotation, "return": None}
    return spec_from_function(tool, effect="read")


def test_a_path_inside_a_dict_of_paths_is_confined(tmp_path: Path) -> None:
    spec = _path_spec(tmp_path, dict[str, Annotated[str, PathWithin(str(tmp_path))]])
    assert isinstance(_check(spec, {"arg": {"a": "x.json"}}).verdict, Accepted)
    assert _rejected_at(_check(spec, {"arg": {"a": "x.json", "b": ESCAPE}})) == ["/arg/b"]


def test_a_path_in_a_tuple_item_is_confined(tmp_path: Path) -> None:
    spec = _path_spec(tmp_path, tuple[int, Annotated[str, PathWithin(str(tmp_path))]])
    assert isinstance(_check(spec, {"arg": [1, "x.json"]}).verdict, Accepted)
    assert _rejected_at(_check(spec, {"arg": [1, ESCAPE]})) == ["/arg/1"]


def test_an_optional_path_takes_the_matching_branch_only(tmp_path: Path) -> None:
    spec = _path_spec(tmp_path, Annotated[str, PathWithin(str(tmp_path))] | None)
    assert isinstance(_check(spec, {"arg": None}).verdict, Accepted)
    assert _rejected_at(_check(spec, {"arg": ESCAPE})) == ["/arg"]


def _schema_spec(schema: dict[str, Any]) -> ToolSpec:
    return ToolSpec(name="t", input_schema=schema, fn=lambda **_: None, effect="read")


def test_pattern_properties_and_recursive_refs_are_walked(tmp_path: Path) -> None:
    path = {"type": "string", MARKER: {"type": "path", "root": str(tmp_path)}}
    schema = {
        "type": "object",
        "$defs": {
            "tree": {
                "type": "object",
                "properties": {"file": path, "child": {"$ref": "#/$defs/tree"}},
            }
        },
        "properties": {"tree": {"$ref": "#/$defs/tree"}},
        "patternProperties": {"^p_": path},
    }
    spec = _schema_spec(schema)
    assert _rejected_at(_check(spec, {"p_x": ESCAPE, "other": ESCAPE})) == ["/p_x"]
    deep: dict[str, Any] = {"file": ESCAPE}
    for _ in range(3000):  # deeper than the interpreter's recursion limit: the walk does not recurse
        deep = {"child": deep}
    problems = compile_tool(spec).checks.problems({"tree": deep})
    assert [p for p, _ in problems] == ["/tree" + "/child" * 3000 + "/file"]
    # a proposal nested that deep is refused before any check reads it, at the level too deep
    assert _rejected_at(_check(spec, {"tree": deep})) == ["/tree" + "/child" * (MAX_DEPTH - 1)]
    shallow: dict[str, Any] = {"file": ESCAPE}
    for _ in range(MAX_DEPTH - 2):  # with the arguments object and the innermost one: MAX_DEPTH levels
        shallow = {"child": shallow}
    assert _rejected_at(_check(spec, {"tree": shallow})) == ["/tree" + "/child" * (MAX_DEPTH - 2) + "/file"]


@pytest.mark.parametrize("keyword", ["not", "if", "contains", "propertyNames"])
def test_a_marker_the_checker_cannot_reach_is_refused_at_registration(keyword: str) -> None:
    marked = {"type": "string", MARKER: {"type": "path", "root": "/srv"}}
    schema = {"type": "object", "properties": {"a": {keyword: marked}}}
    with pytest.raises(ConfigurationError, match="not checked"):
        Runtime().add_tool(name="t", input_schema=schema, fn=lambda **_: None, effect="read")


def test_paths_reach_the_tool_in_canonical_form(tmp_path: Path) -> None:
    rt = Runtime()
    seen: list[str] = []

    def read(path: str) -> str:
        seen.append(path)
        return path

    read.__annotations__ = {"path": Annotated[str, PathWithin(str(tmp_path))], "return": str}
    rt.register(spec_from_function(read, effect="read"))
    for given in ("a.json", "./a.json", "sub/../a.json", "sub//..//a.json"):
        obs = rt.call({"name": "read", "arguments": {"path": given}})
        assert obs.status == "ok", obs.error
    assert seen == ["a.json"] * 4
    assert canonical_path(str(tmp_path), str(tmp_path / "a.json")) == "a.json"
    assert canonical_path(str(tmp_path), ESCAPE) == ESCAPE


def test_spellings_of_one_path_conflict_in_a_plan(tmp_path: Path) -> None:
    rt = Runtime()

    def write(path: str, text: str) -> str:
        return text

    write.__annotations__ = {"path": Annotated[str, PathWithin(str(tmp_path))], "text": str, "return": str}
    rt.register(spec_from_function(write, effect="write", writes=["file:{path}"]))
    nodes = [
        {"id": f"n{i}", "tool": "write", "arguments": {"path": p, "text": str(i)}}
        for i, p in enumerate(["a.json", "./a.json", "sub/../a.json"])
    ]
    result = rt.run_plan(Plan.from_dict({"nodes": nodes}), run_id="spellings")
    assert result.status == "ok", result.error
    assert {(e["from"], e["to"]) for e in result.added_edges} >= {("n0", "n1"), ("n1", "n2")}
    assert {e["resource"] for e in result.added_edges} == {"file:a.json"}


def pay(amount: Money) -> None: ...


def meet(start: Timestamp) -> None: ...


@pytest.mark.parametrize("amount", ["1E+999999999", "1e18", "-1E+40", "9" * 80])
def test_money_amounts_beyond_the_bound_are_invalid_arguments(amount: str) -> None:
    spec = spec_from_function(pay, effect="external")
    assert _rejected_at(_check(spec, {"amount": {"amount": amount, "currency": "EUR"}})) == ["/amount"]
    ok = _check(spec, {"amount": {"amount": "999999999999999999.99", "currency": "EUR"}})
    assert isinstance(ok.verdict, Accepted)


@pytest.mark.parametrize("when", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_a_timestamp_that_overflows_in_utc_is_invalid_arguments(when: str) -> None:
    spec = spec_from_function(meet, effect="write")
    assert _rejected_at(_check(spec, {"start": when})) == ["/start"]
    rt = Runtime()
    rt.register(spec)
    obs = rt.call({"name": "meet", "arguments": {"start": when}})
    assert obs.error is not None and obs.error.category == "invalid_arguments"
