"""The same write proposed again after its tool raised ``SystemExit`` / ``KeyboardInterrupt`` under a
sync call (the exception went on up to the caller, the runtime went on, docs/errors.md). The first
send may have acted, and nothing of this process holds the entry any more: the repeat must answer
at once, ``unknown_commit`` (as any proposal finding an action that may have been sent and whose
outcome is not established), and never send the tool again.

The ledger protocol waits for a holder of a ``dispatched`` entry for ``MAX_WAIT_S``; it is cut
short here so that the wait, where it happens, ends quickly and shows as ``transient``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.ledger import commit as ledger_commit

RAISED: dict[str, Callable[[], BaseException]] = {
    "exit": lambda: SystemExit(3),
    "interrupt": KeyboardInterrupt,
}


def _runtime(path: Path, kind: str, raised: Callable[[], BaseException]) -> tuple[Runtime, list[int]]:
    rt = Runtime(f"sqlite:///{path}", recover_on_start=False)
    sent: list[int] = []

    async def aput(x: int) -> int:
        """Write x, after a wait."""
        sent.append(x)
        await asyncio.sleep(0)
        raise raised()

    def put(x: int) -> int:
        """Write x."""
        sent.append(x)
        raise raised()

    if kind == "async":
        aput.__name__ = "put"
        rt.tool(effect="write", writes=["w:{x}"])(aput)
    else:
        rt.tool(effect="write", writes=["w:{x}"], blocking=kind == "blocking")(put)
    return rt, sent


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "protocol"])
@pytest.mark.parametrize("raised", list(RAISED))
@pytest.mark.parametrize("kind", ["plain", "blocking", "async"])
def test_a_repeat_after_a_tool_exited_answers_unknown_commit_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, raised: str, direct: bool
) -> None:
    """``direct``: the new write's first send in the driver's own frame; else (False) through the
    protocol's generator, as every call but a new one whose steps run inline goes."""
    monkeypatch.setattr(ledger_commit, "MAX_WAIT_S", 0.5)
    rt, sent = _runtime(tmp_path / "exit.db", kind, RAISED[raised])
    rt.engine.driver.direct = direct
    call: dict[str, Any] = {"name": "put", "arguments": {"x": 1}}
    try:
        with pytest.raises(BaseException) as stopped:
            rt.call(call, run_id="r1")
        assert isinstance(stopped.value, KeyboardInterrupt | SystemExit)
        assert sent == [1]
        again = rt.call(call, run_id="r1")
        assert again.error is not None and again.error.category == "unknown_commit", again
        assert sent == [1]  # never sent twice
        [entry] = rt.ledger.list()
        assert entry.state in ("unknown", "unknown_commit"), entry
    finally:
        rt.close()


@pytest.mark.parametrize("raised", list(RAISED))
@pytest.mark.parametrize("kind", ["plain", "blocking", "async"])
def test_an_async_callers_repeat_after_a_tool_exited_answers_unknown_commit_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, raised: str
) -> None:
    """The same under ``await rt.acall``, whose ledger steps run on worker threads (the protocol's
    generator drives a file store there)."""
    monkeypatch.setattr(ledger_commit, "MAX_WAIT_S", 0.5)
    rt, sent = _runtime(tmp_path / "aexit.db", kind, RAISED[raised])
    call: dict[str, Any] = {"name": "put", "arguments": {"x": 1}}

    async def main() -> tuple[BaseException | None, Any]:
        stopped: BaseException | None = None
        try:
            await rt.acall(call, run_id="r1")
        except BaseException as exc:  # the tool's exit, handed on to this caller
            stopped = exc
        return stopped, await rt.acall(call, run_id="r1")

    try:
        stopped, again = asyncio.run(main())
        assert isinstance(stopped, KeyboardInterrupt | SystemExit), stopped
        assert again.error is not None and again.error.category == "unknown_commit", again
        assert sent == [1]  # never sent twice
        [entry] = rt.ledger.list()
        assert entry.state in ("unknown", "unknown_commit"), entry
    finally:
        rt.close()
