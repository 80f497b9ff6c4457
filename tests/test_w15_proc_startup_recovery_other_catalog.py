"""A process whose catalog lacks a tool that another process sharing the store is sending through
leaves that send's entry alone at its start: it cannot know how long the holder may take (the
tool's timeout and retries are the other process's), nor ask the tool's status.

Two services share one store, each with tools of its own (or a newer release dropped a tool the
older one still runs). The first process (a real child) sends a payment through ``pay``, whose
``timeout_s`` is 600 s; the second (this one) has no ``pay`` and starts 200 s later by its clock,
past the wait it computed for a tool it does not know (the default timeout and retries). Its
start-up recovery used to mark the live entry ``unknown_commit``: when the payment service then
refused the attempt (``transient``, nothing sent), the entry could no longer record that, and the
payment proposed again was answered ``unknown_commit`` for a person to resolve, never sent.
An explicit ``rt.recover()`` still reports such an entry ``unknown_commit`` (tests/test_exactly_once.py).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from actionspace import Runtime
from tests.proc import PAY_TOOLS, Ahead, Child, sent
from tests.proc import url as url  # the fixture

AHEAD_S = 200.0
"""How much later than the first process's send the second starts, by its clock."""

_FIRST = PAY_TOOLS + textwrap.dedent(
    """
    import json, sys
    from actionspace import Runtime, ToolCall
    from actionspace.catalog.spec import NO_RETRY

    url, outbox, release = sys.argv[1:4]
    rt = Runtime(url, recover_on_start=False)

    def service(attempt):
        if attempt == 1:
            print("sending", flush=True)
            wait_for(release)
            raise ConnectionRefusedError("the payment service is restarting")  # nothing sent

    add_pay_tools(
        rt, outbox, before=service, look=False, pid=False, timeout_s=600.0, retry=NO_RETRY,
        description="Pay someone; the bank may take up to ten minutes.",
    )
    out = []
    for call_id in ("c1", "c2"):  # the model proposes the payment again after a transient failure
        call = ToolCall(name="pay", arguments={"to": "bob", "cents": 500}, id=call_id)
        obs = rt.call(call, run_id="r", node_id="pay")
        out.append(obs.error.category if obs.error else obs.status)
    rt.close()
    print(json.dumps({"answers": out}), flush=True)
    """
)


def test_a_process_without_the_tool_leaves_a_live_send_of_it_to_its_holder(url: str, tmp_path: Path) -> None:
    outbox, release = tmp_path / "outbox.jsonl", tmp_path / "release"
    with Child(_FIRST, url, str(outbox), str(release)) as first:
        try:
            first.expect("sending")
            second = Runtime(url, clock=Ahead(AHEAD_S))  # its start-up recovery runs at its first call
            try:

                @second.tool(effect="read")
                def look(who: str) -> str:
                    """Look someone up."""
                    return who

                assert second.call({"name": "look", "arguments": {"who": "ana"}}, run_id="other").ok
                (entry,) = second.ledger.list()
                assert entry.state == "dispatched", entry  # the first process's, still sending
            finally:
                second.close()
            release.touch()
            assert first.result() == {"answers": ["transient", "ok"]}
        finally:
            release.touch()
    assert sent(outbox) == [{"to": "bob", "cents": 500}]
