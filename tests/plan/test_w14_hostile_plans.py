"""Plans a hostile model writes: reference indexes no integer conversion takes, node ids one
Unicode normalisation apart, and caller options of the wrong type."""

from __future__ import annotations

import unicodedata
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Plan, Runtime
from actionspace.errors import ConfigurationError, RefError
from actionspace.plan.refs import parse_ref


def _runtime(seen: list[Any]) -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="read", reads=["kv:{key}"])
    def read(key: str) -> dict[str, Any]:
        """Read a value."""
        seen.append(key)
        return {"key": key, "items": [1, 2, 3]}

    @rt.tool(effect="none")
    def echo(v: Any = None) -> Any:
        """Echo a value."""
        seen.append(v)
        return {"v": v}

    return rt


def test_a_reference_index_too_long_to_convert_is_a_reference_error() -> None:
    with pytest.raises(RefError):
        parse_ref("n1.data.items[" + "9" * 5000 + "]")


@pytest.mark.parametrize("where", ["ref", "template"])
def test_a_plan_naming_an_index_of_thousands_of_digits_is_rejected_before_anything_runs(where: str) -> None:
    seen: list[Any] = []
    rt = _runtime(seen)
    path = "n1.data.items[" + "9" * 5000 + "]"
    value = {"$ref": path} if where == "ref" else {"$template": "x {" + path + "}"}
    result = rt.run_plan(
        {
            "nodes": [
                {"id": "n1", "tool": "read", "arguments": {"key": "a"}},
                {"id": "n2", "tool": "echo", "arguments": {"v": value}},
            ]
        }
    )
    assert result.status == "error"
    assert result.error is not None and result.error.category == "invalid_arguments"
    assert result.error.field_errors[0].path == "/nodes/1/arguments/v"
    assert seen == []


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet='0123456789-[]._"azé~/', max_size=60), st.integers(0, 6000))
def test_parse_ref_answers_any_text_with_a_ref_or_a_reference_error(tail: str, digits: int) -> None:
    for text in ("n1.data" + tail, "n1.data[" + "7" * digits + "]" + tail):
        try:
            ref = parse_ref(text)
        except RefError:
            continue
        assert ref.node == "n1"


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (unicodedata.normalize("NFC", "café"), unicodedata.normalize("NFD", "café")),
        ("n1", "\uff4e1"),  # a fullwidth n
        ("ﬁle", "file"),  # a ligature
    ],
)
def test_node_ids_equal_once_unicode_normalised_are_duplicates(first: str, second: str) -> None:
    assert first != second
    seen: list[Any] = []
    rt = _runtime(seen)
    result = rt.run_plan(
        {
            "nodes": [
                {"id": first, "tool": "read", "arguments": {"key": "a"}},
                {"id": second, "tool": "read", "arguments": {"key": "b"}},
            ]
        }
    )
    assert result.status == "error"
    assert result.error is not None and result.error.category == "invalid_arguments"
    assert result.error.field_errors[0].path == "/nodes/1/id"
    assert "duplicate" in result.error.field_errors[0].message
    assert seen == []


def test_ids_that_differ_after_normalisation_still_run_side_by_side() -> None:
    seen: list[Any] = []
    rt = _runtime(seen)
    result = rt.run_plan(
        {
            "nodes": [
                {"id": "café", "tool": "read", "arguments": {"key": "a"}},
                {"id": "cafe", "tool": "read", "arguments": {"key": "b"}},
                {"id": "N1", "tool": "read", "arguments": {"key": "c"}},
                {"id": "n1", "tool": "read", "arguments": {"key": "d"}},
            ]
        }
    )
    assert result.status == "ok"
    assert sorted(seen) == ["a", "b", "c", "d"]


@pytest.mark.parametrize("limit", [1.5, True, "2", float("nan"), [2]])
def test_a_concurrency_limit_that_is_no_integer_is_a_configuration_error(limit: Any) -> None:
    seen: list[Any] = []
    rt = _runtime(seen)
    plan = Plan.from_dict({"nodes": [{"id": "n1", "tool": "read", "arguments": {"key": "a"}}]})
    with pytest.raises(ConfigurationError, match="max_concurrency"):
        rt.run_plan(plan, max_concurrency=limit)
    assert seen == []


@pytest.mark.parametrize("earlier", ["run-1", {"run_id": "x", "nodes": {}}, 3])
def test_retry_of_something_other_than_a_plan_result_is_a_configuration_error(earlier: Any) -> None:
    seen: list[Any] = []
    rt = _runtime(seen)
    plan = {"nodes": [{"id": "n1", "tool": "read", "arguments": {"key": "a"}}]}
    with pytest.raises(ConfigurationError, match="retry_of"):
        rt.run_plan(plan, retry_of=earlier)
    assert seen == []


def test_retry_of_a_result_of_another_run_reuses_nothing() -> None:
    seen: list[Any] = []
    rt = _runtime(seen)
    plan = {"nodes": [{"id": "n1", "tool": "read", "arguments": {"key": "a"}}]}
    first = rt.run_plan(plan, run_id="run-w14-first")
    again = rt.run_plan(plan, run_id="run-w14-other", retry_of=first)
    same = rt.run_plan(plan, run_id="run-w14-first", retry_of=first)
    assert again.status == "ok" and again.stats["reused"] == 0
    assert same.status == "ok" and same.stats["reused"] == 1
