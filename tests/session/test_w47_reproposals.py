"""A scripted model re-proposes the same write after a timeout — with another call id, its
arguments re-ordered, 1 for 1.0, in another provider's shape, after a restart of the process —
and sends three calls in one message (two identical writes, a read of what one wrote). Each side
effect is counted in the tool's own SQLite table, whatever the runtime believes."""

from __future__ import annotations

import json
import multiprocessing as mp
from pathlib import Path
from typing import Any

import pytest

from actionspace.session import Provider
from tests.session.w47_world import answered_ids, anthropic, chat, hermes, responses, sends, world

ARGS = {"to": "+15550100", "text": "running late", "copies": 1}
SAME_AGAIN: list[tuple[Provider, Any]] = [
    ("openai_chat", chat(("call_b", "send_sms", json.dumps(ARGS)))),
    (
        "openai_chat",
        chat(("call_c", "send_sms", '{"copies": 1.0, "text": "running late", "to": "+15550100"}')),
    ),
    (
        "openai_chat",
        chat(("call_d", "send_sms", '{ "text" : "running late" ,\n "to":"+15550100", "copies":1e0}')),
    ),
    (
        "anthropic",
        anthropic(("toolu_9", "send_sms", {"copies": 1, "to": "+15550100", "text": "running late"})),
    ),
    ("openai_responses", responses(("fc_9", "send_sms", json.dumps(dict(reversed(ARGS.items())))))),
    ("openai_chat", hermes("send_sms", {"text": "running late", "copies": 1.0, "to": "+15550100"})),
]


@pytest.mark.parametrize(("provider", "again"), SAME_AGAIN)
def test_a_write_whose_answer_was_lost_is_never_sent_again_however_the_model_rewrites_it(
    tmp_path: Path, provider: Provider, again: Any
) -> None:
    outbox = tmp_path / "outbox.db"
    rt = world(f"sqlite:///{tmp_path / 'rt.db'}", outbox, lose_answer=True)
    s = rt.session(run_id="conv-1", provider=provider)
    s.user("text Bob I'm late")
    first = s.handle(chat(("call_a", "send_sms", json.dumps(ARGS))))
    assert first.observations[0].error is not None
    assert first.observations[0].error.category == "unknown_commit"
    turn = s.handle(again)
    assert len(sends(outbox)) == 1
    (obs,) = turn.observations
    assert obs.error is not None and obs.error.category == "unknown_commit" and obs.error.recovery
    assert answered_ids(provider, turn.messages) == [obs.call_id]
    for first_open in (True, False):  # a second runtime beside the first, then after it closed
        if not first_open:
            rt.close()
        again_rt = world(f"sqlite:///{tmp_path / 'rt.db'}", outbox, lose_answer=False)
        s2 = again_rt.session(run_id="conv-1", provider=provider)
        (later,) = s2.handle(again).observations
        assert later.error is not None and later.error.category == "unknown_commit"
        assert len(sends(outbox)) == 1
        again_rt.close()


@pytest.mark.parametrize(("provider", "again"), SAME_AGAIN)
def test_a_committed_write_proposed_again_in_the_turn_is_replayed_not_sent(
    tmp_path: Path, provider: Provider, again: Any
) -> None:
    outbox = tmp_path / "outbox.db"
    rt = world(f"sqlite:///{tmp_path / 'rt.db'}", outbox)
    s = rt.session(run_id="conv-1", provider=provider)
    s.user("text Bob I'm late")
    assert s.handle(chat(("call_a", "send_sms", json.dumps(ARGS)))).observations[0].status == "ok"
    (obs,) = s.handle(again).observations
    assert obs.status == "ok" and obs.diagnostics.get("replayed")
    rt.close()
    restarted = world(f"sqlite:///{tmp_path / 'rt.db'}", outbox)
    (obs2,) = restarted.session(run_id="conv-1", provider=provider).handle(again).observations
    assert obs2.status == "ok" and obs2.diagnostics.get("replayed")
    assert len(sends(outbox)) == 1
    restarted.close()


def _process(store: str, outbox: str, call_id: str, out: Any) -> None:
    from tests.session.w47_world import chat as chat_message
    from tests.session.w47_world import world as make_world

    rt = make_world(store, Path(outbox), lose_answer=True)
    s = rt.session(run_id="conv-7", provider="openai_chat")
    if call_id == "call_1":
        s.user("text Bob I'm late")
    args = json.dumps(ARGS if call_id == "call_1" else dict(reversed(ARGS.items())))
    (obs,) = s.handle(chat_message((call_id, "send_sms", args))).observations
    out.put((obs.error.category if obs.error else "ok", obs.call_id))
    rt.close()


def test_a_real_second_process_never_resends_a_write_whose_answer_was_lost(tmp_path: Path) -> None:
    ctx = mp.get_context("spawn")
    store, outbox = f"sqlite:///{tmp_path / 'rt.db'}", str(tmp_path / "outbox.db")
    seen = []
    for call_id in ("call_1", "call_2"):
        out = ctx.Queue()
        proc = ctx.Process(target=_process, args=(store, outbox, call_id, out))
        proc.start()
        seen.append(out.get(timeout=60))
        proc.join(timeout=60)
        assert proc.exitcode == 0
    assert seen == [("unknown_commit", "call_1"), ("unknown_commit", "call_2")]
    assert len(sends(Path(outbox))) == 1


@pytest.mark.parametrize("together", [True, False])
def test_three_calls_in_one_message_two_identical_writes_run_twice_and_the_read_sees_them(
    tmp_path: Path, together: bool
) -> None:
    outbox = tmp_path / "outbox.db"
    rt = world(f"sqlite:///{tmp_path / 'rt.db'}", outbox)
    s = rt.session(run_id="conv-3", provider="openai_chat")
    s.user("send it twice, then set and read the counter")
    message = chat(
        ("c1", "send_sms", json.dumps(ARGS)),
        ("c2", "send_sms", json.dumps(dict(reversed(ARGS.items())))),
        ("c3", "set_counter", '{"name": "n", "value": 7}'),
        ("c4", "read_counter", '{"name": "n"}'),
    )
    if together:
        import asyncio

        turn = asyncio.run(s.ahandle(message))
    else:
        turn = s.handle(message)
    assert [o.status for o in turn.observations] == ["ok"] * 4
    assert [o.call_id for o in turn.observations] == ["c1", "c2", "c3", "c4"]
    assert answered_ids("openai_chat", turn.messages) == ["c1", "c2", "c3", "c4"]
    assert turn.observations[3].data == {"name": "n", "value": 7}  # ordered after the write
    assert sends(outbox).count(("+15550100", "running late")) == 2  # occurrence 1 and 2: two actions
    again = s.handle(message)  # the whole message again in the turn: replayed, nothing sent
    assert all(o.diagnostics.get("replayed") for o in again.observations[:3])
    assert len(sends(outbox)) == 3
    rt.close()
