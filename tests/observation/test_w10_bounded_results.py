"""Results that cost far more to write than to hold end as bounded observations, through
``Runtime.acall`` and ``Runtime.call``: a list shared down forty levels (2**40 paths), one long
text held a hundred thousand times, a mapping or list whose iteration never ends, a numpy-like
value whose ``tolist`` is such a list. Each runs in a child process with a memory ceiling and a
deadline, so a pass that would write it all fails the test instead of stalling or exhausting
the machine."""

from __future__ import annotations

import asyncio
import json
import textwrap
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace._canonical import canonical_text, dumps_plain, normalize, normalize_checked
from actionspace._json_values import whole_json
from tests.observation.child_runs import cut_and_said_so, run_child

_CHILD = textwrap.dedent(
    """
    import asyncio, json, resource, sys
    from collections.abc import Mapping
    from actionspace import Runtime


    class Endless(Mapping):
        def __getitem__(self, key):
            return key
        def __len__(self):
            return 1
        def __iter__(self):
            n = 0
            while True:
                yield n
                n += 1

    class EndlessList(list):
        def __iter__(self):
            while True:
                yield 1

    class Array:
        dtype = "float64"
        size = 2
        ndim = 1
        def tolist(self):
            return shared(40)

    def deep(levels):
        value = "bottom"
        for _ in range(levels):
            value = {"k": value}
        return value

    CASES = {
        "shared": lambda: shared(40),
        "shared-in-object": lambda: {"rows": shared(40), "ok": True},
        "long-text-held-often": lambda: ["x" * (1 << 20)] * 100_000,
        "endless-mapping": lambda: {"m": Endless(), "after": 1},
        "endless-list": lambda: {"l": EndlessList([1, 2, 3])},
        "array-of-shared": lambda: {"a": Array()},
        "deep": lambda: deep(100_000),
    }

    case, how = sys.argv[1], sys.argv[2]
    rt = Runtime("memory://")

    @rt.tool(name="give", effect="read")
    def give(n: int):
        "Give the value."
        return CASES[case]()

    call = {"name": "give", "arguments": {"n": 1}}
    obs = asyncio.run(rt.acall(call)) if how == "acall" else rt.call(call)
    out = {"status": obs.status, "complete": obs.complete, "category": obs.error and obs.error.category}
    out["data_bytes"] = len(json.dumps(obs.data))
    if obs.artifact_ref is not None:
        with rt.artifacts.open(obs.artifact_ref) as stored:
            stored.seek(0, 2)
            out["size"] = size = stored.tell()
            stored.seek(max(0, size - 4096))
            out["tail"] = stored.read().decode("utf-8", "replace")
            stored.seek(0)
            try:
                out["artifact"] = json.loads(stored.read()) if size < (64 << 20) else None
            except RecursionError:  # nested deeper than json.loads reads
                out["artifact"] = None
    print(json.dumps(out))
    """
)


def _child(case: str, how: str) -> dict[str, Any]:
    return run_child(_CHILD, case, how)


@pytest.mark.parametrize("how", ["acall", "call"])
def test_a_list_shared_forty_levels_deep_ends_cut_with_the_cut_marked_in_its_artifact(how: str) -> None:
    out = _child("shared", how)
    cut_and_said_so(out)
    assert '"<too large>"' in out["tail"]
    assert out["artifact"] is not None  # valid JSON, closed where the budget ran out


def test_a_shared_list_inside_an_object_keeps_the_rest_of_the_object() -> None:
    out = _child("shared-in-object", "acall")
    cut_and_said_so(out)
    assert out["artifact"]["ok"] is True


def test_one_long_text_held_a_hundred_thousand_times_ends_cut() -> None:
    out = _child("long-text-held-often", "acall")
    cut_and_said_so(out)
    assert out["tail"].endswith('"<too large>"]')


def test_a_mapping_whose_items_never_end_is_read_as_far_as_its_len_says() -> None:
    out = _child("endless-mapping", "acall")
    cut_and_said_so(out)
    assert out["artifact"] == {"after": 1, "m": {"0": 0, "<too large>": "<too large>"}}


def test_a_list_whose_iteration_never_ends_is_read_as_far_as_its_len_says() -> None:
    out = _child("endless-list", "call")
    cut_and_said_so(out)
    assert out["artifact"] == {"l": [1, 1, 1, "<too large>"]}


def test_a_numpy_like_value_whose_tolist_is_shared_ends_cut() -> None:
    out = _child("array-of-shared", "acall")
    cut_and_said_so(out)
    assert '"<too large>"' in out["tail"]


def test_nesting_a_hundred_thousand_levels_deep_ends_cut_with_all_of_it_in_the_artifact() -> None:
    out = _child("deep", "acall")
    cut_and_said_so(out)
    assert out["size"] == len('{"k":') * 100_000 + len('"bottom"') + 100_000
    assert out["tail"] == "}" * 4096


class _ItemsRaise(dict[str, Any]):
    def items(self) -> Any:
        raise RuntimeError("items")


class _KeyCompareRaises(str):
    def __lt__(self, other: object) -> bool:
        raise RuntimeError("lt")

    def __gt__(self, other: object) -> bool:
        raise RuntimeError("gt")


def _give(value: Any) -> Runtime:
    rt = Runtime("memory://")

    @rt.tool(name="give", effect="read")
    def give(n: int) -> Any:
        """Give the value."""
        return value

    return rt


def test_a_nested_dict_subclass_whose_items_raise_is_shown_as_a_placeholder_not_an_internal_error() -> None:
    with _give({"x": _ItemsRaise(a=1), "y": [2]}) as rt:
        obs = asyncio.run(rt.acall({"name": "give", "arguments": {"n": 1}}))
    assert obs.ok, obs.error
    assert obs.data == {"x": "<_ItemsRaise object: cannot be shown (RuntimeError)>", "y": [2]}


def test_a_key_whose_comparison_raises_is_written_by_its_text_not_an_internal_error() -> None:
    with _give({"a": 1, _KeyCompareRaises("b"): 2}) as rt:
        obs = rt.call({"name": "give", "arguments": {"n": 1}})
    assert obs.ok, obs.error
    assert obs.data == {"a": 1, "b": 2}


def _shared(draw: st.DrawFn) -> Any:
    pool: list[Any] = [draw(st.integers(-5, 5)), draw(st.text(max_size=3)), None, True, 1.5]
    for _ in range(draw(st.integers(1, 12))):
        picks = draw(st.lists(st.integers(0, len(pool) - 1), max_size=4))
        parts = [pool[i] for i in picks]
        kind = draw(st.sampled_from(("list", "tuple", "dict")))
        if kind == "dict":
            pool.append({f"k{at}": part for at, part in enumerate(parts)})
        else:
            pool.append(parts if kind == "list" else tuple(parts))
    return pool[-1]


@settings(max_examples=200, deadline=None)
@given(value=st.composite(_shared)())
def test_a_value_sharing_its_parts_writes_as_the_same_value_built_apart(value: Any) -> None:
    apart = json.loads(json.dumps(value))  # the same value, nothing shared
    plain, cut = normalize_checked(value)
    assert not cut
    assert canonical_text(value) == dumps_plain(plain) == dumps_plain(normalize(apart))
    assert "".join(whole_json(value)) == dumps_plain(plain)


def _hostile_pool(draw: st.DrawFn) -> Any:
    long_text = "y" * draw(st.integers(250, 600))
    pool: list[Any] = [long_text, "short", 7, None, _KeyCompareRaises("sub" * 100)]
    for _ in range(draw(st.integers(1, 14))):
        picks = draw(st.lists(st.integers(0, len(pool) - 1), max_size=5))
        parts = [pool[i] for i in picks]
        kind = draw(st.sampled_from(("list", "tuple", "dict", "set-of-texts")))
        if kind == "dict":
            pool.append({f"k{at}": part for at, part in enumerate(parts)})
        elif kind == "set-of-texts":
            pool.append({part for part in parts if type(part) is str})
        else:
            pool.append(parts if kind == "list" else tuple(parts))
    return pool[-1]


@settings(max_examples=300, deadline=None)
@given(value=st.composite(_hostile_pool)(), budget=st.integers(20, 400))
def test_whatever_normalize_keeps_the_c_encoder_writes_and_whole_json_stays_json(
    value: Any, budget: int
) -> None:
    import actionspace._canonical as canonical
    import actionspace._encoder as encoder
    import actionspace._json_values as json_values

    with pytest.MonkeyPatch.context() as patched:  # budgets small enough for generated values to pass
        patched.setattr(canonical, "NORMALIZE_UNITS", budget)
        patched.setattr(encoder, "PLAIN_UNITS", 4 * budget)
        patched.setattr(json_values, "WHOLE_UNITS", 2 * budget)
        plain, cut = normalize_checked(value)
        text = dumps_plain(plain)  # never past the encoder's budget: normalize kept less
        whole = "".join(whole_json(value))
    json.loads(whole)  # closed where its budget ran out: still one JSON text
    if not cut and '"<too large>"' not in whole:
        assert whole == text
    if '"<too large>"' in text:
        assert cut
