"""A tool result that is a model (pydantic, or a dataclass holding one) sharing its parts ends as a
bounded observation, as a plain value sharing them does: a list shared down forty levels (2**40
paths through 80 small lists), one dict or one model held a hundred thousand times. Pydantic's own
dump would write each of them whole, in code nothing can interrupt, so it is handed only what its
budget affords; past that the model is read field by field and cut, ``"<too large>"`` marking the
cut and the observation ``complete: false``. Each runs through ``Runtime.call``,
``Runtime.acall``, ``Runtime.call_all`` and a plan node, in a child process with a memory ceiling
and a deadline, so a pass that would write it all fails the test instead of stalling or exhausting
the machine."""

from __future__ import annotations

import dataclasses
import json
import textwrap
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from actionspace._canonical import dumps_plain, normalize, normalize_checked
from actionspace._encoder import dump_within
from actionspace._json_values import whole_json
from tests.observation.child_runs import cut_and_said_so, run_child

_CHILD = textwrap.dedent(
    """
    import asyncio, dataclasses, json, resource, sys
    from typing import Any
    from pydantic import BaseModel
    from actionspace import Runtime
    from actionspace.plan import Plan, PlanNode


    class Holder(BaseModel):
        data: Any
        answer: bool = True

    class Row(BaseModel):
        cells: dict[str, str]

    class Table(BaseModel):
        rows: list[Row]

    @dataclasses.dataclass
    class Box:
        inner: Any

    ROW = {f"k{at}": "v" * 10 for at in range(1000)}
    CASES = {
        "shared": lambda: Holder(data=shared(40)),
        "dict-held-often": lambda: Holder(data=[ROW] * 100_000),
        "model-held-often": lambda: Table(rows=[Row(cells=ROW)] * 100_000),
        "dataclass-of-model": lambda: Box(inner=Holder(data=shared(40))),
    }

    case, how = sys.argv[1], sys.argv[2]
    rt = Runtime("memory://")

    @rt.tool(name="give", effect="read")
    def give(n: int):
        "Give the value."
        return CASES[case]()

    call = {"name": "give", "arguments": {"n": 1}}
    if how == "acall":
        obs = asyncio.run(rt.acall(call))
    elif how == "call":
        obs = rt.call(call)
    elif how == "call_all":
        obs = rt.call_all([call])[0]
    else:
        obs = rt.run_plan(Plan(nodes=[PlanNode(id="n", tool="give", arguments={"n": 1})])).nodes["n"]
    out = {"status": obs.status, "complete": obs.complete, "category": obs.error and obs.error.category}
    out["data_bytes"] = len(json.dumps(obs.data))
    if obs.artifact_ref is not None:
        with rt.artifacts.open(obs.artifact_ref) as stored:
            stored.seek(0, 2)
            out["size"] = size = stored.tell()
            stored.seek(0)
            out["head"] = stored.read(64).decode("utf-8", "replace")
            stored.seek(0)
            out["artifact"] = json.loads(stored.read()) if size < (64 << 20) else None
            stored.seek(max(0, size - 4096))
            out["tail"] = stored.read().decode("utf-8", "replace")
    print(json.dumps(out))
    """
)


def _child(case: str, how: str) -> dict[str, Any]:
    return run_child(_CHILD, case, how)


def _cut_and_said_so(out: dict[str, Any]) -> None:
    cut_and_said_so(out)
    assert '"<too large>"' in out["tail"]  # the artifact marks where it was cut


@pytest.mark.parametrize("how", ["call", "acall", "call_all", "plan"])
def test_a_model_holding_a_list_shared_forty_levels_deep_ends_cut(how: str) -> None:
    out = _child("shared", how)
    _cut_and_said_so(out)
    assert out["artifact"]["answer"] is True  # what comes before the cut is kept; the artifact is JSON


@pytest.mark.parametrize("how", ["plan"])
def test_a_model_holding_one_dict_a_hundred_thousand_times_ends_cut(how: str) -> None:
    out = _child("dict-held-often", how)
    _cut_and_said_so(out)


def test_a_model_holding_one_model_a_hundred_thousand_times_ends_cut() -> None:
    out = _child("model-held-often", "call")
    _cut_and_said_so(out)
    assert out["head"].startswith('{"rows":[{"cells":{"k0":"vvvvvvvvvv","k1":"vvvvvvvvvv"')


def test_a_dataclass_holding_such_a_model_ends_cut() -> None:
    out = _child("dataclass-of-model", "acall")
    _cut_and_said_so(out)
    assert out["artifact"]["inner"]["answer"] is True


class _Item(BaseModel):
    name: str
    count: int
    tags: list[str]
    parts: list[Any]


@dataclasses.dataclass
class _Pair:
    left: Any
    right: Any


def _shared_models(draw: st.DrawFn) -> Any:
    pool: list[Any] = [draw(st.integers(-5, 5)), draw(st.text(max_size=3)), None, True]
    for _ in range(draw(st.integers(1, 10))):
        picks = [pool[at] for at in draw(st.lists(st.integers(0, len(pool) - 1), max_size=4))]
        kind = draw(st.sampled_from(("list", "dict", "model", "dataclass")))
        if kind == "model":
            pool.append(_Item(name="n", count=len(picks), tags=["a", "b"], parts=picks))
        elif kind == "dataclass":
            pool.append(_Pair(picks[0] if picks else None, picks))
        elif kind == "dict":
            pool.append({f"k{at}": part for at, part in enumerate(picks)})
        else:
            pool.append(picks)
    return pool[-1]


@settings(max_examples=200, deadline=None)
@given(value=st.composite(_shared_models)())
def test_a_model_within_the_budget_is_written_as_its_dump(value: Any) -> None:
    plain, cut = normalize_checked(value)
    assert not cut
    assert "".join(whole_json(value)) == dumps_plain(plain)
    if isinstance(value, BaseModel):
        assert dump_within(value, 1 << 20)
        assert plain == normalize(value.model_dump(mode="json"))


@settings(max_examples=200, deadline=None)
@given(value=st.composite(_shared_models)(), budget=st.integers(20, 400))
def test_a_model_past_a_small_budget_is_cut_and_its_whole_text_stays_json(value: Any, budget: int) -> None:
    import actionspace._canonical as canonical
    import actionspace._json_values as json_values

    with pytest.MonkeyPatch.context() as patched:  # budgets small enough for generated values to pass
        patched.setattr(canonical, "NORMALIZE_UNITS", budget)
        patched.setattr(json_values, "WHOLE_UNITS", 2 * budget)
        plain, cut = normalize_checked(value)
        text = dumps_plain(plain)
        whole = "".join(whole_json(value))
    json.loads(whole)
    json.loads(text)
    if '"<too large>"' in text:
        assert cut


def test_the_budget_a_model_is_dumped_within_counts_what_sharing_multiplies() -> None:
    row = {f"k{at}": at for at in range(100)}
    assert dump_within(_Item(name="a", count=1, tags=["x"], parts=[row] * 10), 2_000)
    assert not dump_within(_Item(name="a", count=1, tags=["x"], parts=[row] * 1_000), 2_000)
    assert not dump_within(_Pair(row, [_Item(name="a", count=1, tags=[], parts=[row])] * 1_000), 2_000)
    text = "t" * 4096
    assert dump_within(_Item(name="a", count=1, tags=[text], parts=[]), 2_000)
    assert not dump_within(_Item(name="a", count=1, tags=[text] * 100, parts=[]), 2_000)
