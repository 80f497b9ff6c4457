"""What a model handed the runtime is recorded and refused at a bounded cost, whatever its ``repr``.

A provider object's own ``__repr__`` may return 500 MB, never return, or raise; a tuple shared down
forty levels has a ``repr`` of 2**40 items, and so has a pydantic model holding a list shared so.
The ``model_output`` event, every other event's safe copy, the refusal of arguments with a key that
is not text, and ``parse`` itself read such values within a bound and never run the object's own
``__repr__``. The values whose plain ``repr`` would not end run in a child process with a memory
ceiling and a deadline, so a pass that writes them whole fails the test instead of stalling."""

from __future__ import annotations

import json
import textwrap
from collections import deque
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace._json_values import unfit_arguments
from actionspace._placeholders import bounded_repr
from actionspace.trace.store_encoding import bounded_raw, encode_data
from tests.observation.child_runs import run_child


class Loud:
    """A provider object whose ``repr`` counts its calls (it could as well return 500 MB)."""

    calls = 0

    def __repr__(self) -> str:
        Loud.calls += 1
        return "x" * 1000

    __str__ = __repr__


def test_a_provider_objects_own_repr_is_never_run_for_its_events() -> None:
    Loud.calls = 0
    assert bounded_raw(Loud()) == {"raw": f"<{__name__}.Loud object>"}
    assert json.loads(encode_data({"v": [Loud()], "k": {Loud(): 1}})) == {
        "v": [f"<{__name__}.Loud object>"],
        "k": {f"<{__name__}.Loud object>": 1},
    }
    rt = Runtime("memory://")
    obs = rt.call(Loud(), run_id="r")
    assert obs.status == "error" and obs.error is not None and obs.error.category == "parse_error"
    [event] = [e for e in rt.trace.events("r") if e.kind == "model_output"]
    assert event.data["raw"] == f"<{__name__}.Loud object>"
    assert Loud.calls == 0


def test_arguments_with_a_key_that_is_not_text_are_refused_without_its_repr() -> None:
    Loud.calls = 0
    where, reason, _ = unfit_arguments({"a": {Loud(): 1}}) or ("", "", False)
    assert where == "/a" and reason == f"has a key that is not a string (Loud <{__name__}.Loud object>)"
    assert Loud.calls == 0


_CHILD = textwrap.dedent(
    """
    import json, sys
    from typing import Any
    from pydantic import BaseModel
    from actionspace import Runtime
    from actionspace.parse import call_ids, parse
    from actionspace.trace.store_encoding import bounded_raw, encode_data

    class Holder(BaseModel):
        data: Any

    class Dumps:
        def model_dump(self, **kwargs):
            return ["y" * 1000] * 1_000_000

    def shared_tuple(levels):
        value = "leaf"
        for _ in range(levels):
            value = (value, value)
        return value

    VALUES = {
        "tuple": lambda: shared_tuple(40),
        "list": lambda: shared(40),
        "model": lambda: Holder(data=shared(40)),
        "dumps": Dumps,
    }
    value = VALUES[sys.argv[1]]()
    out = {}
    if sys.argv[2] == "events":
        out["raw"] = len(json.dumps(bounded_raw(value)))
        out["event"] = len(encode_data({"v": value, "k": {frozenset({1}): value}}))
    else:
        parsed = parse(value)
        out["reason"] = parsed.error and parsed.error.details.get("reason")
        out["ids"] = list(call_ids(value))
        rt = Runtime("memory://")
        obs = rt.call(value, run_id="r")
        out["category"] = obs.error and obs.error.category
    print(json.dumps(out))
    """
)


def test_values_whose_repr_would_never_end_are_recorded_bounded() -> None:
    for case in ("tuple", "list", "model"):
        out = run_child(_CHILD, case, "events", deadline_s=120)
        assert 0 < out["raw"] < 200_000, case
        assert 0 < out["event"] <= 1_100_000, case  # an oversized event keeps a digest and a prefix


def test_a_provider_object_too_large_to_read_is_a_parse_error() -> None:
    for case in ("tuple", "list", "model", "dumps"):
        out = run_child(_CHILD, case, "parse", deadline_s=120)
        assert out["category"] == "parse_error", case
        assert out["ids"] == [], case
        if case in ("model", "dumps"):
            assert out["reason"] == "too_large", case


_PLAIN = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8) | st.binary(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(st.text(max_size=4) | st.integers(), inner, max_size=4)
        | st.lists(inner, max_size=4).map(deque)
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(value=_PLAIN, limit=st.integers(0, 200))
def test_a_bounded_repr_is_the_repr_itself_cut_at_its_limit(value: Any, limit: int) -> None:
    whole = repr(value)
    assert bounded_repr(value, 1 << 20) == whole
    cut = bounded_repr(value, limit)
    assert cut == whole if len(whole) <= limit else cut == whole[:limit] + "…"
