"""A run id given to the runtime is non-empty text, alike at every entry point.

An empty run id was read four ways: ``call`` and ``acall`` ran in the default run,
``session`` and ``new_run`` started a new random run each time (a session reopened with ``""``
after a restart lost its node identities, and a write proposed again was sent again), and
``call_all`` ran in a run literally named ``""``. A run id that is not text (``5``, ``b"x"``, a
list) ended in Python's own ``TypeError`` from deep inside (``argument of type 'int' is not
iterable``). Now an empty run id is a ``ValueError`` and a run id that is not text a ``TypeError``,
each naming what was given, raised before anything is written.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.plan import Plan, PlanNode

_CALL = {"name": "pay", "arguments": {"to": "a", "amount": 1}}


def _runtime() -> tuple[Runtime, list[int]]:
    rt = Runtime("memory://", recover_on_start=False)
    paid: list[int] = []

    @rt.tool(effect="write")
    def pay(to: str, amount: int) -> str:
        """Pay ``amount`` to ``to``."""
        paid.append(amount)
        return "paid"

    return rt, paid


_ENTRIES: dict[str, Callable[[Runtime, Any], object]] = {
    "call": lambda rt, run: rt.call(_CALL, run_id=run),
    "acall": lambda rt, run: asyncio.run(rt.acall(_CALL, run_id=run)),
    "call_all": lambda rt, run: rt.call_all([_CALL], run_id=run),
    "acall_all": lambda rt, run: asyncio.run(rt.acall_all([_CALL], run_id=run)),
    "session": lambda rt, run: rt.session(run).handle(
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {
            "name": "pay", "arguments": '{"to": "a", "amount": 1}'}}]}
    ),
    "new_run": lambda rt, run: rt.new_run(run),
    "run_id_of": lambda rt, run: rt.run_id_of(run),
    "record": lambda rt, run: rt.record(run, "verified", {"ok": True}),
    "run_plan": lambda rt, run: rt.run_plan(
        Plan(nodes=[PlanNode(id="p", tool="pay", arguments={"to": "a", "amount": 1})]), run_id=run
    ),
}  # fmt: skip


@pytest.mark.parametrize("entry", sorted(_ENTRIES))
def test_an_empty_run_id_is_refused_alike_everywhere_and_nothing_runs(entry: str) -> None:
    rt, paid = _runtime()
    with rt:
        with pytest.raises(ValueError, match="empty"):
            _ENTRIES[entry](rt, "")
        assert paid == []
        assert rt.trace.events("") == []
        assert rt.ledger.list() == []


@pytest.mark.parametrize("odd", [5, 1.5, True, b"run", ["run"], {"run": 1}, ("run",)], ids=repr)
@pytest.mark.parametrize("entry", sorted(_ENTRIES))
def test_a_run_id_that_is_not_text_is_a_type_error_naming_its_type(entry: str, odd: object) -> None:
    rt, paid = _runtime()
    with rt:
        with pytest.raises(TypeError, match=f"run id must be text \\(str\\), not {type(odd).__name__}"):
            _ENTRIES[entry](rt, odd)
        assert paid == []


@pytest.mark.parametrize("entry", sorted(_ENTRIES))
def test_a_text_run_id_names_its_run_at_every_entry(entry: str) -> None:
    rt, _paid = _runtime()
    with rt:
        _ENTRIES[entry](rt, "run-7")
        assert [e.kind for e in rt.trace.events("run-7")][:1] == ["run_started"]
