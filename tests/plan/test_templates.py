"""Template references (``{"$template": "My GPA is {n1.data.gpa}"}``) and number→integer references."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from actionspace import Plan, Runtime, tool
from actionspace.cli import _mount, app
from actionspace.plan.refs import render_value, substitute
from actionspace.types import template_parts

runner = CliRunner()


@tool(effect="read")
def student(name: str) -> dict[str, float]:
    """A student's record."""
    return {"gpa": 3.7, "year": 2.0, "mean_rank": 2.5}


@tool(effect="none")
def say(text: str) -> str:
    """Repeat a sentence."""
    return text


@tool(effect="none")
def pick(index: int, items: list[str]) -> str:
    """The item at an index."""
    return items[index]


@tool(
    effect="read",
    output_schema={
        "type": "object",
        "properties": {"address": {"type": "object", "properties": {"city": {"type": "string"}}}},
    },
)
def profile(name: str) -> dict[str, Any]:
    """A profile with a nested address."""
    return {"address": {"city": "Oslo"}}


TOOLS: list[Callable[..., Any]] = [student, say, pick, profile]


def _rt() -> Runtime:
    return Runtime("memory://", tools=TOOLS)


TEMPLATED = {
    "nodes": [
        {"id": "var1", "tool": "student", "arguments": {"name": "Ada"}},
        {
            "id": "var2",
            "tool": "say",
            "arguments": {"text": {"$template": "My GPA is {var1.data.gpa} ({{sic}})"}},
        },
    ]
}
NUMBER_TO_INTEGER = {
    "nodes": [
        {"id": "n1", "tool": "student", "arguments": {"name": "Ada"}},
        {
            "id": "n2",
            "tool": "pick",
            "arguments": {"index": {"$ref": "n1.data.year"}, "items": ["a", "b", "c"]},
        },
    ]
}


def test_template_parts_split_text_and_references() -> None:
    assert template_parts("My GPA is {var1.data.gpa}") == [("My GPA is ", False), ("var1.data.gpa", True)]
    assert template_parts("{{x}} {a.data}") == [("{x} ", False), ("a.data", True)]
    with pytest.raises(ValueError):
        template_parts("broken {a.data")


def test_values_read_in_a_template_as_in_json() -> None:
    assert [render_value(v) for v in ("x", 3, 3.0, 3.5, True, None, [1])] == [
        "x",
        "3",
        "3",
        "3.5",
        "true",
        "null",
        "[1]",
    ]
    assert substitute({"t": {"$template": "{a.data.x}-{a.data.x}"}}, lambda _: 7) == {"t": "7-7"}


def test_run_plan_builds_the_string_and_orders_the_nodes() -> None:
    rt = _rt()
    result = rt.run_plan(TEMPLATED)
    assert result.status == "ok", {k: o.error for k, o in result.nodes.items()}
    assert result.nodes["var2"].data == "My GPA is 3.7 ({sic})"
    assert ("var1", "var2") in result.edges


def test_a_template_reference_is_traced_and_labelled_like_a_ref() -> None:
    rt = _rt()

    @rt.tool(effect="read", labels={"confidentiality": "secret"})
    def grades(name: str) -> dict[str, float]:
        return {"gpa": 3.9}

    plan = {
        "nodes": [
            {"id": "g", "tool": "grades", "arguments": {"name": "Ada"}},
            {"id": "s", "tool": "say", "arguments": {"text": {"$template": "GPA {g.data.gpa}"}}},
        ]
    }
    result = rt.run_plan(plan, run_id="tmpl")
    assert result.status == "ok"
    started = next(e.data for e in rt.trace.events("tmpl") if e.kind == "plan_started")
    assert next(n for n in started["nodes"] if n["id"] == "s")["refs"] == ["g"]
    assert "secret" in result.nodes["s"].provenance.labels  # the source's label flowed through the text


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"index": {"$template": "{var1.data.gpa}"}, "items": []}, "a $template is a string"),
        ({"index": 0, "items": [{"$template": "{nowhere.data.x}"}]}, "unknown node"),
        ({"index": 0, "items": [{"$template": "{var1.data.gpa"}]}, "$template"),
    ],
)
def test_the_plan_check_rejects_a_bad_template(arguments: dict[str, Any], message: str) -> None:
    rt = _rt()
    plan = {
        "nodes": [
            {"id": "var1", "tool": "student", "arguments": {"name": "Ada"}},
            {"id": "n2", "tool": "pick", "arguments": arguments},
        ]
    }
    result = rt.run_plan(plan)
    assert result.status == "error" and result.nodes == {}  # nothing ran
    assert result.error is not None and result.error.category == "invalid_arguments"
    assert any(message in f.message for f in result.error.field_errors), result.error


def test_a_template_of_an_object_is_rejected_before_anything_runs() -> None:
    rt = _rt()
    plan = Plan.from_dict(
        {
            "nodes": [
                {"id": "p", "tool": "profile", "arguments": {"name": "Ada"}},
                {"id": "s", "tool": "say", "arguments": {"text": {"$template": "lives at {p.data.address}"}}},
            ]
        }
    )
    result = rt.run_plan(plan)
    assert result.status == "error" and result.nodes == {}
    assert result.error is not None
    assert "a template holds scalars" in result.error.field_errors[0].message


def test_a_number_output_feeding_an_integer_passes_the_check_and_is_validated_when_the_node_runs() -> None:
    rt = _rt()
    ok = rt.run_plan(NUMBER_TO_INTEGER)
    assert ok.status == "ok", {k: o.error for k, o in ok.nodes.items()}
    assert ok.nodes["n2"].data == "c"
    fractional = json.loads(json.dumps(NUMBER_TO_INTEGER).replace("n1.data.year", "n1.data.mean_rank"))
    failed = rt.run_plan(fractional)
    assert failed.nodes["n1"].status == "ok"  # the plan ran: the check let it through
    error = failed.nodes["n2"].error
    assert error is not None and error.category == "invalid_arguments"


@pytest.mark.parametrize("plan", [TEMPLATED, NUMBER_TO_INTEGER])
def test_plan_check_cli_accepts_templates_and_number_to_integer(tmp_path: Path, plan: dict[str, Any]) -> None:
    _mount()
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    for options in ((), ("--tools", "tests.plan.test_templates:TOOLS")):
        result = runner.invoke(app, ["plan", "check", str(path), *options])
        assert result.exit_code == 0, result.output
        assert result.output.startswith(("ok: 2 nodes, 1 edge\n", "ok: 2 nodes, 1 edge ("))
