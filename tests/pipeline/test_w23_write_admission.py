"""Whether a write frame takes a call (pipeline/_write_admit.py ``admitted``) is decided with fewer
calls than before, and decides exactly as before:

- arguments of a schema of typed properties (``Entry.typed``), each exactly of its type, are taken
  without ``unfit_arguments``, the compiled schema or ``_digested``'s walk: over generated schemas
  (typed or not, properties required or not, ``additionalProperties`` absent, true or false) and
  generated arguments (missing, extra or mistyped keys, integers past RFC 8785's domain, floats,
  texts with U+0000, non-ASCII or decomposed characters), a call is taken exactly when the checks
  before would take it, with the same canonical text and digest;
- the tool's entry is checked whole once per value of ``actionspace._epoch.EPOCH``, as
  pipeline/_direct.py checks it: every change an entry was decided from, made between two calls
  or by the tool during a call, leaves the calls after it as the general path ends them.
"""

from __future__ import annotations

import json
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from actionspace import Runtime, ToolCall
from actionspace._epoch import EPOCH
from actionspace._json_values import unfit_arguments
from actionspace.pipeline import _write_admit
from actionspace.pipeline._entry import typed_of
from actionspace.pipeline._write_parts import _digested
from actionspace.policy.principal import Principal
from tests.pipeline.test_fast import _view
from tests.pipeline.test_w19_write_frame import _strip
from tests.plan.test_w16_kept_entry import CHANGES, SCHEMA, SECRET, _change

WHO = Principal(id="p", scopes=("write:*", "none:*"))
NAMES = ["a", "b", "key", "value", "é"]
TYPES = ["integer", "string", "boolean"]


@st.composite
def schemas(draw: st.DrawFn) -> dict[str, Any]:
    """Mostly schemas of typed properties; some with a property the typed form does not cover."""
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=4, unique=True))
    properties: dict[str, Any] = {}
    for name in names:
        sub: dict[str, Any] = {"type": draw(st.sampled_from(TYPES))}
        extra = draw(st.sampled_from(["", "", "title", "description", "minimum", "number", "null"]))
        if extra in ("title", "description"):
            sub[extra] = "x"
        elif extra == "minimum":
            sub = {"type": "integer", "minimum": 0}
        elif extra in ("number", "null"):
            sub = {"type": extra}
        properties[name] = sub
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    required = draw(st.lists(st.sampled_from(names), unique=True, max_size=len(names)))
    listed = draw(st.booleans())  # an empty list given, or none
    if required or listed:
        schema["required"] = required
    closed = draw(st.sampled_from(["absent", "absent", "true", "false"]))
    if closed != "absent":
        schema["additionalProperties"] = closed == "true"
    return schema


VALUES = (
    st.integers(-(2**60), 2**60)
    | st.sampled_from([2**53 - 1, 2**53, -(2**53 - 1), -(2**53), 0, True, False, None, 1.0, 0.5])
    | st.text(max_size=5)
    | st.sampled_from(["ok", "a\x00b", "café", "cafe\u0301", "日本", '"q"', "\\"])
    | st.lists(st.integers(0, 3), max_size=2)
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    schema=schemas(),
    args=st.dictionaries(st.sampled_from([*NAMES, "other"]), VALUES, max_size=5),
)
def test_a_call_is_taken_exactly_when_the_checks_before_would_take_it(
    schema: dict[str, Any], args: dict[str, Any]
) -> None:
    rt = Runtime("memory://", recover_on_start=False)
    rt.add_tool(name="t", input_schema=schema, fn=lambda **kw: 1, effect="write", blocking=False)
    with rt:
        run_id = rt.new_run("run-admit")
        run = rt.engine.run(run_id)
        first = {name: 0 if sub.get("type") != "string" else "" for name, sub in schema["properties"].items()}
        rt.call(ToolCall(name="t", arguments=first), run_id=run_id, node_id="first")  # the name resolved
        messages = rt.engine.messages
        taken = _write_admit.admitted(messages, ToolCall(name="t", arguments=args), run_id, "n1", None)
        entry = rt.engine.fast._entries.get((id(run), "t"))
        assert entry is not None
        # the reading before: the fitness walk, the compiled schema, then the arguments' text
        before = None
        if unfit_arguments(args) is None and entry.compiled.validator.is_valid(args):
            before = _digested(args)
        if before is None:
            assert taken is None
        else:
            assert taken is not None
            assert (taken[4], taken[5]) == before
        assert (entry.typed is not None) == (typed_of(entry.compiled) is not None)


def test_typed_arguments_are_not_walked_or_asked_the_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bench's ``write`` tool: open schema, nothing required, a text and an integer."""
    schema = {"type": "object", "properties": {"key": {"type": "string"}, "value": {"type": "integer"}}}
    rt = Runtime("memory://", recover_on_start=False)
    rt.add_tool(name="put", input_schema=schema, fn=lambda key, value: 3, effect="write", blocking=False)
    with rt:
        run_id = rt.new_run("run-typed")
        for i in range(2):  # the name resolved, then the entry built
            rt.call(ToolCall(name="put", arguments={"key": "w", "value": i}), run_id=run_id, node_id=f"w{i}")
        entry = rt.engine.fast._entries[(id(rt.engine.run(run_id)), "put")]
        assert entry.typed == ({"key": str, "value": int}, ())

        def refused(*args: Any) -> Any:
            raise AssertionError("asked")

        monkeypatch.setattr(_write_admit, "unfit_arguments", refused)
        monkeypatch.setattr(_write_admit, "_digested", refused)
        monkeypatch.setattr(type(entry.compiled.validator), "is_valid", refused)
        for i in range(5):
            obs = rt.call(
                ToolCall(name="put", arguments={"key": f"k{i}", "value": i}), run_id=run_id, node_id=f"n{i}"
            )
            assert (obs.status, obs.data) == ("ok", 3)
        # arguments outside the typed form are asked as before (and refused here)
        with pytest.raises(AssertionError, match="asked"):
            rt.engine.messages.calls(
                ToolCall(name="put", arguments={"key": "k", "value": 1.0}), run_id=run_id, node_id="f"
            )


def _played(frame: bool, change: str, at: int) -> tuple[dict[str, Any], bool]:
    """Eight writes of ``secret`` on one run; the ``at``-th makes ``change`` while its tool runs
    (``at`` 0: between the third and the fourth call). The view of the run (its ledger entries
    too), and whether the frame had checked ``secret``'s entry at the counter's value before."""
    rt = Runtime("memory://", recover_on_start=False)
    rt.engine.messages.writes = frame
    run: list[str] = []
    count = [0]

    def secret(x: int) -> int:
        count[0] += 1
        if count[0] == at:
            _change(rt, run[0], change)
        return x * 3

    rt.add_tool(
        name="secret",
        input_schema=SCHEMA,
        fn=secret,
        effect="write",
        version="1",
        labels=SECRET,
        blocking=False,
    )
    rt.add_tool(name="other", input_schema=SCHEMA, fn=lambda x: x + 1, effect="write", version="1")
    stamped = False
    with rt:
        run_id = rt.new_run("run-write-epoch", principal=WHO)
        run.append(run_id)
        out = []
        for i in range(8):
            if i == 3:
                entry = rt.engine.fast._entries.get((id(rt.engine.run(run_id)), "secret"))
                stamped = entry is not None and entry.checked == EPOCH[0]
                if at == 0:
                    _change(rt, run_id, change)
            out.append(rt.call(ToolCall(name="secret", arguments={"x": i}), run_id=run_id, node_id=f"n{i}"))
        view = _view(rt, run_id, out)
        view["ledger"] = sorted(
            json.dumps(_strip(e.to_dict()), sort_keys=True, default=repr)
            for e in rt.engine.ledger.list(limit=1000)
            if e.run_id == run_id
        )
    return view, stamped


@pytest.mark.parametrize("change", CHANGES)
@pytest.mark.parametrize("at", [0, 5])
def test_every_change_an_entry_was_decided_from_is_seen_by_the_next_write(change: str, at: int) -> None:
    framed, stamped = _played(True, change, at)
    general, _ = _played(False, change, at)
    assert stamped  # the writes before the change took the checked entry as it was
    assert framed == general
