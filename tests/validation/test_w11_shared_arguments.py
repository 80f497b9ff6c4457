"""Arguments a Python caller built with shared parts (a ``ToolCall`` or a dict message, never JSON
text, which cannot share) end as ``invalid_arguments`` within a bounded time, with nothing run and
nothing written: a list shared down forty levels (2**40 paths through 80 small lists), one dict of
a thousand keys held a hundred thousand times, one long text held a hundred thousand times. Their
JSON text would never end, so no check may write or walk it whole. Each runs through
``Runtime.call``, ``Runtime.acall``, ``Runtime.call_all`` and a plan node, in a child process with a
memory ceiling and a deadline, so a pass that would walk it all fails the test instead of stalling
or exhausting the machine."""

from __future__ import annotations

import json
import textwrap
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace._canonical import args_digest
from actionspace._encoder import CONTAINER_UNITS, LONG_TEXT, TEXT_UNIT
from actionspace._json_values import TOO_COSTLY, too_costly, unfit_arguments
from tests.observation.child_runs import run_child

_CHILD = textwrap.dedent(
    """
    import asyncio, json, resource, sys
    from actionspace import Runtime, ToolCall
    from actionspace.plan import Plan, PlanNode


    CASES = {
        "shared": lambda: shared(40),
        "dict-held-often": lambda: [{f"k{at}": "v" for at in range(1000)}] * 100_000,
        "text-held-often": lambda: ["x" * (1 << 20)] * 100_000,
    }

    case, how = sys.argv[1], sys.argv[2]
    rt = Runtime("memory://", recover_on_start=False)
    sent = []

    def take(**kw):
        sent.append(1)
        return "done"

    schema = {"type": "object", "properties": {"x": {}}}
    rt.add_tool(
        name="pay", input_schema=schema, fn=take, effect="external", idempotency="none", description="Pay."
    )
    arguments = {"x": CASES[case]()}
    call = ToolCall(name="pay", arguments=arguments, id="c1")
    message = {"name": "pay", "arguments": arguments}
    if how == "call":
        obs = rt.call(call)
    elif how == "acall":
        obs = asyncio.run(rt.acall(message))
    elif how == "call_all":
        obs = rt.call_all([call, ToolCall(name="pay", arguments={"x": 1}, id="c2")])[0]
    elif how == "call_all-messages":
        obs = rt.call_all([message])[0]
    else:
        obs = rt.run_plan(Plan(nodes=[PlanNode(id="n", tool="pay", arguments=arguments)]))
    error = obs.error
    out = {
        "category": error and error.category,
        "message": error and error.message,
        "fields": [[f.path, f.message] for f in error.field_errors] if error else [],
        "sent": len(sent) - (how == "call_all"),  # the second call of call_all is fine, and runs
        "ledger": len(rt.ledger.list()) - (how == "call_all"),
    }
    print(json.dumps(out))
    """
)


def _child(case: str, how: str) -> dict[str, Any]:
    return run_child(_CHILD, case, how)


def _refused_and_nothing_ran(out: dict[str, Any]) -> None:
    assert out["category"] == "invalid_arguments", out
    assert any(message == TOO_COSTLY for _, message in out["fields"]), out["fields"]
    assert out["sent"] == 0 and out["ledger"] == 0


@pytest.mark.parametrize("how", ["call", "acall", "call_all", "call_all-messages", "plan"])
def test_arguments_holding_a_list_shared_forty_levels_deep_are_refused(how: str) -> None:
    _refused_and_nothing_ran(_child("shared", how))


@pytest.mark.parametrize("how", ["call", "plan"])
def test_arguments_holding_one_dict_a_hundred_thousand_times_are_refused(how: str) -> None:
    _refused_and_nothing_ran(_child("dict-held-often", how))


@pytest.mark.parametrize("how", ["acall", "call_all"])
def test_arguments_holding_one_long_text_a_hundred_thousand_times_are_refused(how: str) -> None:
    _refused_and_nothing_ran(_child("text-held-often", how))


def test_the_refusal_names_why_and_the_validate_stage_says_it_in_its_message() -> None:
    from actionspace import Runtime, ToolCall

    value: Any = "leaf"
    for _ in range(30):
        value = [value, value]
    rt = Runtime("memory://", recover_on_start=False)
    rt.add_tool(
        name="look", input_schema={"type": "object"}, fn=lambda **kw: 1, effect="none", description="Look."
    )
    obs = rt.call(ToolCall(name="look", arguments={"x": value}, id="c1"))
    assert obs.error is not None and obs.error.category == "invalid_arguments"
    assert obs.error.message == "arguments are too large to write as JSON"
    assert [(f.path, f.message) for f in obs.error.field_errors] == [("", TOO_COSTLY)]
    rt.close()


def _shared_arguments(draw: st.DrawFn) -> dict[str, Any]:
    long_text = "y" * draw(st.integers(LONG_TEXT, 2 * LONG_TEXT))
    pool: list[Any] = [draw(st.integers(-5, 5)), draw(st.text(max_size=3)), None, True, 1.5, long_text]
    for _ in range(draw(st.integers(1, 12))):
        picks = [pool[at] for at in draw(st.lists(st.integers(0, len(pool) - 1), max_size=4))]
        kind = draw(st.sampled_from(("list", "tuple", "dict", "long-key")))
        if kind == "dict":
            pool.append({f"k{at}": part for at, part in enumerate(picks)})
        elif kind == "long-key":
            pool.append({long_text + str(at): part for at, part in enumerate(picks)})
        else:
            pool.append(picks if kind == "list" else tuple(picks))
    return {"x": pool[-1], "y": pool[-1]}


@settings(max_examples=200, deadline=None)
@given(arguments=st.composite(_shared_arguments)())
def test_arguments_sharing_their_parts_are_checked_as_the_same_arguments_built_apart(
    arguments: dict[str, Any],
) -> None:
    apart = json.loads(json.dumps(arguments))  # the same value, nothing shared
    unfit = unfit_arguments(arguments)
    assert unfit == unfit_arguments(apart)  # the same verdict, at the same place
    assert too_costly(arguments) is None
    if unfit is None:
        assert args_digest(arguments) == args_digest(apart)


def _written_past(value: Any, units: int) -> bool:
    """Whether writing ``value`` out, every part each place it is held, costs more than ``units``
    (a container its items and 16, a long text again each time after the first): by writing it."""
    left, met, stack = units, set(), [value]
    while stack and left >= 0:
        item = stack.pop()
        if isinstance(item, dict):
            left -= len(item) + CONTAINER_UNITS
            stack.extend([*item, *item.values()])
        elif isinstance(item, list | tuple):
            left -= len(item) + CONTAINER_UNITS
            stack.extend(item)
        elif isinstance(item, str) and len(item) >= LONG_TEXT:
            if id(item) in met:
                left -= len(item) // TEXT_UNIT
            met.add(id(item))
    return left < 0


@settings(max_examples=100, deadline=None)
@given(arguments=st.composite(_shared_arguments)(), units=st.integers(40, 2_000))
def test_the_bound_counts_each_part_each_place_it_is_held_as_writing_it_out_does(
    arguments: dict[str, Any], units: int
) -> None:
    import actionspace._json_values as json_values

    with pytest.MonkeyPatch.context() as patched:  # a bound small enough for generated values to cross
        patched.setattr(json_values, "ARGUMENT_UNITS", units)
        verdict = too_costly(arguments)
        unfit = unfit_arguments(arguments)
    assert (verdict is not None) == _written_past(arguments, units)
    if verdict is not None and unfit_arguments(json.loads(json.dumps(arguments))) is None:
        assert unfit == ("", TOO_COSTLY, False)  # x and y hold one value: what it shares is counted


def test_a_part_held_deeper_the_second_time_is_walked_again_for_its_depth() -> None:
    from actionspace._json_values import MAX_DEPTH

    inner: Any = "leaf"
    for _ in range(MAX_DEPTH - 5):
        inner = [inner]
    deeper: Any = inner
    for _ in range(10):
        deeper = [deeper]
    unfit = unfit_arguments({"a": inner, "b": deeper})
    assert unfit is not None and "deeper than" in unfit[1]
    assert unfit[0].startswith("/b/")
