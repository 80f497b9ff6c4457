"""A proposal of a write in a second process while the first still retries it: the proposal must
wait for the holder for as long as the retries may go on, as the start-up recovery does
(tests/test_w15_proc_startup_recovery_retries.py has the tools and the first process).

The proposal finds the entry ``dispatched`` 49 s after the first send by its clock (past the old
wait of 2 x 2 s + 30 s, well within the retries' deadline of 300 s); it settled the entry (the
status query answers "not committed": the retry still runs) and sent the payment again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime, ToolCall
from tests.proc import Ahead, Child, sent
from tests.proc import url as url  # the fixture
from tests.test_w15_proc_startup_recovery_retries import _FIRST, AHEAD_S, _add_tools


def test_a_proposal_beside_a_retrying_write_waits_for_its_holder(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same wait, for a proposal of the same action in the second process: it finds the entry
    ``dispatched`` by the first and must not settle it while the retries may still run. The first
    is released as soon as the proposal decided to wait for it (never, if it settled the entry)."""
    from actionspace.ledger import commit

    outbox, release = tmp_path / "outbox.jsonl", tmp_path / "release"
    holder_gone = commit._holder_gone

    def holder_gone_then_release(spec: Any, entry: Any) -> bool:
        gone = holder_gone(spec, entry)
        if not gone:
            release.touch()  # the proposal waits for the holder: let the holder end
        return gone

    with Child(_FIRST, url, str(outbox), str(release)) as first:
        try:
            first.expect("retrying")
            second = Runtime(url, recover_on_start=False)
            try:
                _add_tools(second, outbox, release)
                # the ``time`` module as ledger/commit.py reads it: 49 s after the first send
                monkeypatch.setattr(commit, "time", Ahead(AHEAD_S))
                monkeypatch.setattr(commit, "_holder_gone", holder_gone_then_release)
                again = ToolCall(name="pay", arguments={"to": "bob", "cents": 500}, id="c2")
                obs = second.call(again, run_id="r", node_id="pay")
                monkeypatch.undo()
                release.touch()
                assert first.result() == {"status": "ok", "error": None}
                assert obs.ok and obs.diagnostics.get("replayed") is True, obs
            finally:
                second.close()
        finally:
            release.touch()
    assert [s["cents"] for s in sent(outbox)] == [500]
