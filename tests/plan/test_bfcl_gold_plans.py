"""BFCL's parallel-multiple gold call sequences, run end to end as nested plans.

Data: the Berkeley Function Calling Leaderboard (``bfcl-eval``, Apache-2.0), category
``parallel_multiple`` — 200 questions whose ground truth is several calls of several functions.
The pinned wheel is fetched with pip into a cache outside the source tree
(:func:`actionspace.evaluation.bfcl.fetch`); nothing of it is committed here.

Each gold sequence becomes a plan in the style of nested-call suites (NESTFUL writes
``"My GPA is $var1.gpa$"``): one node holds the user's values (numbers typed only as ``number``,
as a model's output is), and every gold call takes its arguments from it — numbers by ``$ref``
(so ``number`` feeds ``integer`` parameters), strings by ``$template`` mixing literal text with a
reference — each call after the previous one. The plan must pass the check, every node must run,
and each tool must receive exactly the gold arguments.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.catalog.spec import ToolSpec
from actionspace.evaluation import bfcl
from actionspace.evaluation._bfcl_schema import first_answer, to_tool_spec

pytestmark = pytest.mark.slow


class _Values:
    """The literal values of one gold sequence, each under a variable name (``v0``, ``v1`` …)."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    def add(self, value: Any) -> str:
        name = f"v{len(self.values)}"
        self.values[name] = value
        return name

    def schema(self) -> dict[str, Any]:
        kinds = {str: "string", bool: "boolean", int: "number", float: "number"}
        return {
            "type": "object",
            "properties": {k: {"type": kinds[type(v)]} for k, v in self.values.items()},
            "required": list(self.values),
        }


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _nest(value: Any, values: _Values) -> Any:
    """A gold argument value written as references to the values node."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return {"$ref": f"values.data.{values.add(value)}"}
    if isinstance(value, str):
        head, sep, tail = value.rpartition(" ")
        if not value:
            return value
        if sep:  # literal text, then a referenced word: "San {values.data.v3}"
            return {"$template": f"{_escape(head)} {{values.data.{values.add(tail)}}}"}
        return {"$template": f"{{values.data.{values.add(value)}}}"}
    if isinstance(value, list):
        return [_nest(v, values) for v in value]
    if isinstance(value, Mapping):
        return {k: _nest(v, values) for k, v in value.items()}
    return value


def _plan_of(entry: bfcl.BfclEntry) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any]]], _Values]:
    values = _Values()
    gold = [first_answer(answer, entry.functions) for answer in entry.ground_truth]
    nodes: list[dict[str, Any]] = [{"id": "values", "tool": "user_values", "arguments": {}}]
    for i, call in enumerate(gold):
        node: dict[str, Any] = {
            "id": f"c{i}",
            "tool": call.name,
            "arguments": {k: _nest(v, values) for k, v in call.arguments.items()},
        }
        if i:
            node["depends_on"] = [f"c{i - 1}"]
        nodes.append(node)
    return {"nodes": nodes}, [(c.name, dict(c.arguments)) for c in gold], values


def _echo(**kwargs: Any) -> dict[str, Any]:
    return kwargs


def _runtime(entry: bfcl.BfclEntry, values: _Values) -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)
    for doc in entry.functions:
        rt.register(to_tool_spec(doc, fn=_echo))
    rt.register(
        ToolSpec(
            name="user_values",
            input_schema={"type": "object", "properties": {}},
            output_schema=values.schema(),
            effect="none",
            fn=lambda: dict(values.values),
        )
    )
    return rt


@pytest.fixture(scope="module")
def entries() -> list[bfcl.BfclEntry]:
    try:
        bfcl.fetch()
    except bfcl.BfclDataError as exc:  # no network and no cache: nothing to run against
        pytest.skip(f"BFCL data unavailable: {exc}")
    return bfcl.load("parallel_multiple")


def _plain(entry: bfcl.BfclEntry, gold: list[tuple[str, dict[str, Any]]], values: _Values) -> list[Any]:
    """What each gold call's tool receives when the call is made directly (no plan): the control."""
    with _runtime(entry, values) as rt:
        run = rt.new_run()
        out = [rt.call({"name": name, "arguments": arguments}, run_id=run) for name, arguments in gold]
    return [o.data if o.status == "ok" else None for o in out]


def test_every_gold_sequence_runs_as_a_nested_plan(entries: list[bfcl.BfclEntry]) -> None:
    assert len(entries) == 200
    templated = number_to_integer = 0
    gold_invalid: list[str] = []
    failures: dict[str, str] = {}
    for entry in entries:
        plan, gold, values = _plan_of(entry)
        control = _plain(entry, gold, values)
        templated += "$template" in repr(plan)
        number_to_integer += any(
            isinstance(v, int) and not isinstance(v, bool) for v in values.values.values()
        ) and "integer" in repr(entry.functions)
        with _runtime(entry, values) as rt:
            result = rt.run_plan(plan)
        if any(c is None for c in control):  # BFCL's own answer fails the function's schema
            gold_invalid.append(entry.id)
            if result.status == "ok":
                failures[entry.id] = "the plan accepted what the direct call rejects"
            continue
        if result.error is not None:
            failures[entry.id] = f"check: {result.error.message}"
            continue
        for i, (name, _arguments) in enumerate(gold):
            obs = result.nodes[f"c{i}"]
            if obs.status != "ok" or obs.data != control[i]:
                failures[entry.id] = f"c{i} {name}: {obs.error.message if obs.error else obs.data!r}"
                break
    assert failures == {}
    assert len(gold_invalid) <= 5, gold_invalid  # known faults of the data set, rejected both ways
    assert templated >= 150  # most sequences carry text built by a template
    assert number_to_integer >= 50  # and numbers typed "number" feeding integer parameters


def test_a_nested_plan_names_its_references_in_the_trace(entries: list[bfcl.BfclEntry]) -> None:
    entry = entries[0]
    plan, _gold, values = _plan_of(entry)
    with _runtime(entry, values) as rt:
        result = rt.run_plan(plan, run_id="bfcl-nested")
        assert result.status == "ok"
        started = next(e.data for e in rt.trace.events("bfcl-nested") if e.kind == "plan_started")
    refs = {n["id"]: n.get("refs") for n in started["nodes"]}
    assert refs["c0"] == ["values"] and refs["c1"] == ["values"]
