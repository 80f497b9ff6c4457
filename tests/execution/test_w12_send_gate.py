"""The gate that decides, once, whether a write's send began (execution/_sends.py): whatever order
its caller (opening it, queueing a blocking attempt, a worker beginning it) and a close
(setting ``closed``, withdrawing it) act in, a tool is called only under a gate that no withdrawal
succeeded on, and a withdrawal succeeds only on a gate under which no tool was called."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.execution._sends import WITHDRAWN, SendGate, gated

_STEPS = st.lists(
    st.sampled_from(["open", "open_deferred", "queue", "run", "close", "withdraw"]), max_size=12
)


@settings(max_examples=300, deadline=None)
@given(_STEPS)
def test_a_send_is_either_withdrawn_or_begun_never_both(steps: list[str]) -> None:
    closed = [False]
    gate = SendGate(lambda: closed[0])
    called: list[int] = []
    withdrawn: list[bool] = []
    queued: list[Future[Any]] = []

    def tool() -> int:
        called.append(1)
        return 1

    for step in steps:
        if step in ("open", "open_deferred"):
            gate.opens(deferred=step == "open_deferred")
        elif step == "queue":
            fut = gate.queue(Future)
            if fut is not None:
                queued.append(fut)
        elif step == "run":  # a worker takes the latest queued attempt, unless it was cancelled
            waiting = [f for f in queued if not f.done() and not f.running()]
            if waiting and waiting[-1].set_running_or_notify_cancel():
                waiting[-1].set_result(gated(gate, tool, {}))
        elif step == "close":
            closed[0] = True
        else:
            withdrawn.append(gate.withdraw())
    assert not (called and any(withdrawn)), (steps, called, withdrawn)
    if any(withdrawn):
        assert gate.withdrawn and not gate.begun
        assert all(f.cancelled() or f.result() is WITHDRAWN for f in queued if f.done())
    if called:
        assert gate.begun and not gate.withdraw()  # a send that began is never withdrawn
    if closed[0] and not gate.begun:  # nothing begins once the runtime closed
        assert not gate.opens(deferred=False) and gate.queue(Future) is None and not gate.start()
