"""An atomic group's ledger entry is timed by its members: while they may still run, neither the
start-up recovery of another process nor a proposal of the same group settles it.

The first process (a real child) runs a group of two members whose tool may take 100 s an attempt:
the first member returns, the second blocks until the test releases it (a file), so the group is
live. The second process (this one) runs 150 s later by its clock — within the 200 s its members
may take, past the 2 × 30 s + 30 s + 30 s a group's entry was given with the default timeout. Its
start-up recovery (or a proposal of the group) used to ask the environment ("not committed": the
second member still runs) and put the entry back to ``accepted``, so the group could be applied
twice.
"""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from actionspace import Plan, RetryPolicy, Runtime
from actionspace.catalog.spec import DEFAULT_TIMEOUT_S, NO_RETRY, ToolSpec
from actionspace.ledger.commit import MAX_WAIT_S, new_entry
from actionspace.ledger.recover import holder_window
from actionspace.plan.environments import SqliteEnvironment
from actionspace.plan.groups import SpecsWithGroups, environment_spec
from tests.plan.settings_table import make_settings_db, rows
from tests.proc import BESIDE, WAIT_FOR, Child
from tests.proc import url as url  # the fixture

MEMBER_TIMEOUT_S = 100.0
AHEAD_S = 150.0
"""How much later than the first process the second runs, by its clock: within the members' time."""

PLAN: dict[str, Any] = {
    "nodes": [
        {"id": "a", "tool": "put", "arguments": {"name": "a", "value": "1"}},
        {"id": "b", "tool": "put", "arguments": {"name": "b", "value": "2"}},
    ],
    "groups": [{"id": "apply", "nodes": ["a", "b"]}],
}

_TOOLS = WAIT_FOR + textwrap.dedent(
    """
    import json, os
    from actionspace.catalog.spec import NO_RETRY

    def add_tools(rt, outbox, release, hold=True):
        def put(name: str, value: str, transaction=None) -> str:
            with open(outbox, "a") as f:
                f.write(json.dumps({"name": name, "pid": os.getpid()}) + "\\n")
            if hold and name == "b":
                print("inside", flush=True)
                wait_for(release)  # the member is live until the test releases it
            transaction.connection.execute("INSERT OR REPLACE INTO settings VALUES (?, ?)", (name, value))
            return value

        rt.add_tool(
            name="put", fn=put, effect="write", transaction="settings", timeout_s=%(timeout)r,
            retry=NO_RETRY, description="Set a setting.", writes=["setting:{name}"],
            input_schema={"type": "object", "properties": {"name": {"type": "string"},
                          "value": {"type": "string"}}, "required": ["name", "value"]},
        )
        rt.add_tool(
            name="look", fn=lambda who: who, effect="read", description="Look someone up.",
            input_schema={"type": "object", "properties": {"who": {"type": "string"}}},
        )
    """
) % {"timeout": MEMBER_TIMEOUT_S}

_FIRST = _TOOLS + textwrap.dedent(
    """
    import sys
    from actionspace import Runtime
    from actionspace.plan.environments import SqliteEnvironment
    url, env_db, outbox, release, plan = sys.argv[1:6]
    rt = Runtime(url, recover_on_start=False)
    rt.environment("settings", SqliteEnvironment(env_db))
    add_tools(rt, outbox, release)
    result = rt.run_plan(json.loads(plan), run_id="r")
    rt.close()
    print(json.dumps({"status": result.status}), flush=True)
    """
)


class _Ahead:
    """The system clock, ``ahead_s`` later; ``step_s`` more at each reading of the monotonic one
    (a proposal's bounded wait for the holder then ends after a few looks, not 30 s)."""

    def __init__(self, ahead_s: float, step_s: float = 0.0) -> None:
        self.ahead_s = ahead_s
        self.step_s = step_s
        self.steps = 0.0

    def time(self) -> float:
        return time.time() + self.ahead_s

    def monotonic(self) -> float:
        self.steps += self.step_s
        return time.monotonic() + self.steps


def _add_tools(rt: Runtime, outbox: Path, release: Path, env: SqliteEnvironment) -> None:
    """The very tools and environment the first process has; here nothing blocks."""
    rt.environment("settings", env)
    scope: dict[str, Any] = {}
    exec(_TOOLS, scope)
    scope["add_tools"](rt, str(outbox), str(release), hold=False)


def _sent(outbox: Path) -> list[str]:
    return [json.loads(line)["name"] for line in outbox.read_text().splitlines()] if outbox.exists() else []


def _group(rt: Runtime) -> Any:
    [entry] = [e for e in rt.ledger.list(limit=100) if e.node_id == "group:apply"]
    return entry


def _start_first(url: str, tmp_path: Path) -> tuple[Child, Path, Path, Path, SqliteEnvironment]:
    env_db, outbox, release = make_settings_db(tmp_path / "env.db"), tmp_path / "out.jsonl", tmp_path / "go"
    env = SqliteEnvironment(env_db)  # its commit table made before the child holds the file's lock
    first = Child(_FIRST, url, str(env_db), str(outbox), str(release), json.dumps(PLAN))
    return first, env_db, outbox, release, env


def test_a_process_starting_beside_a_live_group_leaves_its_entry_to_its_holder(
    url: str, tmp_path: Path
) -> None:
    first, env_db, outbox, release, env = _start_first(url, tmp_path)
    with first:
        try:
            first.expect("inside")  # member a returned, member b runs: the group is live
            second = Runtime(url, clock=_Ahead(AHEAD_S))  # recovery at its first call, as a process starts
            try:
                _add_tools(second, outbox, release, env)
                assert second.call({"name": "look", "arguments": {"who": "ana"}}, run_id="other").ok
                entry = _group(second)
                assert entry.state == "dispatched", entry  # still the first process's, its member running

                release.touch()
                assert first.result() == {"status": "ok"}

                again = second.run_plan(PLAN, run_id="r")
                assert again.status == "ok", again.failed
                assert again.nodes["apply"].diagnostics.get("replayed") is True, again.nodes["apply"]
            finally:
                second.close()
        finally:
            release.touch()
    assert _sent(outbox) == ["a", "b"]  # each member ran once, in the first process
    assert rows(env_db) == [("a", "1"), ("b", "2")]


def test_a_proposal_of_a_live_group_waits_for_its_holder_instead_of_settling_it(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, env_db, outbox, release, env = _start_first(url, tmp_path)
    with first:
        try:
            first.expect("inside")
            second = Runtime(url, recover_on_start=False)
            try:
                _add_tools(second, outbox, release, env)
                with monkeypatch.context() as m:  # the proposal looks 150 s after the group was sent
                    m.setattr("actionspace.ledger.commit.time", _Ahead(AHEAD_S, step_s=1.0))
                    while_live = second.run_plan(PLAN, run_id="r")
                apply = while_live.nodes["apply"]
                assert apply.error is not None and apply.error.category == "unknown_commit", apply
                assert apply.error.details.get("state") == "dispatched", apply.error  # its holder's still
                assert _group(second).state == "dispatched"

                release.touch()
                assert first.result() == {"status": "ok"}

                again = second.run_plan(PLAN, run_id="r")
                assert again.status == "ok", again.failed
                assert again.nodes["apply"].diagnostics.get("replayed") is True, again.nodes["apply"]
            finally:
                second.close()
        finally:
            release.touch()
    assert _sent(outbox) == ["a", "b"]
    assert rows(env_db) == [("a", "1"), ("b", "2")]


def _left_dispatched(rt: Runtime, env: SqliteEnvironment, tools: list[str]) -> str:
    """A group entry as a process that died while its members ran leaves it; its key."""
    calls = [[f"n{i}", tool, {"name": f"n{i}", "value": "1"}] for i, tool in enumerate(tools)]
    spec = environment_spec("settings", env)
    entry = new_entry(
        key="as1_" + "7" * 32, run_id="r", node_id="group:apply", spec=spec, arguments={"calls": calls}
    )
    rt.ledger.begin(entry)
    rt.ledger.transition(entry.key, ("accepted",), entry.evolve(state="dispatched", attempts=1))
    return entry.key


@pytest.mark.parametrize("members", [1, 2, 5])
def test_the_start_up_recovery_settles_a_group_entry_once_its_members_window_passed(
    tmp_path: Path, members: int
) -> None:
    """The wait is bounded by the members' time: past it, the start-up recovery asks the
    environment (not committed: back to ``accepted``); just within it, the entry is left alone
    while another process of the store lives (with none alive, no one can hold it:
    tests/test_w22_proc_startup_recovery_alone.py)."""
    url = f"sqlite:///{tmp_path / 'run.db'}"
    env = SqliteEnvironment(make_settings_db(tmp_path / "env.db"))
    outbox, release = tmp_path / "out.jsonl", tmp_path / "go"
    with Child(BESIDE, url, str(tmp_path / "beside")) as beside:
        beside.expect("ready")  # a live process: as far as anyone can tell, the holder
        with Runtime(url, recover_on_start=False) as rt:
            _add_tools(rt, outbox, release, env)
            put = rt.catalog.get("put")
            key = _left_dispatched(rt, env, [put.key] * members)
        window = holder_window(_tool(members * MEMBER_TIMEOUT_S, RetryPolicy()))  # one send as long as them
        for ahead_s, state in ((window - 5.0, "dispatched"), (window + 1.0, "accepted")):
            with Runtime(url, clock=_Ahead(ahead_s)) as rt:
                _add_tools(rt, outbox, release, env)
                assert rt.call({"name": "look", "arguments": {"who": "ana"}}, run_id="other").ok
                stored = rt.ledger.get(key)
                assert stored is not None and stored.state == state, (ahead_s, stored)
        (tmp_path / "beside").touch()
        beside.finish()


def test_a_group_entry_naming_a_tool_not_registered_here_is_left_to_its_holder(tmp_path: Path) -> None:
    """How long its members run only its own process can tell, as for any tool not registered."""
    url = f"sqlite:///{tmp_path / 'run.db'}"
    env = SqliteEnvironment(make_settings_db(tmp_path / "env.db"))
    outbox, release = tmp_path / "out.jsonl", tmp_path / "go"
    with Runtime(url, recover_on_start=False) as rt:
        _add_tools(rt, outbox, release, env)
        key = _left_dispatched(rt, env, [rt.catalog.get("put").key, "gone@1"])
    with Runtime(url, clock=_Ahead(10 * 24 * 3600.0)) as rt:
        _add_tools(rt, outbox, release, env)
        assert rt.call({"name": "look", "arguments": {"who": "ana"}}, run_id="other").ok
        stored = rt.ledger.get(key)
        assert stored is not None and stored.state == "dispatched", stored
        specs = SpecsWithGroups(rt.catalog, {"settings": env})
        assert specs.holding(stored) is None
        report = rt.recover()  # asked for by hand: settled, whatever its tools
        assert key in report.redispatchable, report


def _tool(timeout_s: float, retry: RetryPolicy) -> ToolSpec:
    return ToolSpec(name="t", description="t", effect="write", timeout_s=timeout_s, retry=retry)


@pytest.mark.parametrize("timeout_s", [0.5, 30.0, 100.0, 600.0])
@pytest.mark.parametrize("retry", [NO_RETRY, RetryPolicy(max_attempts=4, deadline_s=300.0)])
@pytest.mark.parametrize("count", [1, 3])
def test_the_group_window_covers_every_member_one_after_another(
    tmp_path: Path, timeout_s: float, retry: RetryPolicy, count: int
) -> None:
    """Each member may take its last attempt's start plus its timeout; the group's window covers
    their sum plus the wait for a late answer, and never shrinks below a default tool's."""
    from actionspace.plan.groups import group_timeout

    member = _tool(timeout_s, retry)
    last_start = retry.deadline_s if retry.max_attempts > 1 else 0.0
    members_s = count * (last_start + timeout_s)
    assert group_timeout([member] * count) == max(DEFAULT_TIMEOUT_S, members_s)
    env = SqliteEnvironment(tmp_path / "env.db")
    window = holder_window(environment_spec("settings", env, [member] * count))
    assert window >= members_s + min(members_s, MAX_WAIT_S)
    assert window >= holder_window(environment_spec("settings", env))
    plain = environment_spec("settings", env, [member] * count)
    assert plain.key == "group.settings@1" and plain.idempotency == "query"


def test_a_run_plan_group_is_timed_by_its_members(tmp_path: Path) -> None:
    """The spec a group runs under in this process (which a proposal's wait reads) is its members'."""
    env = SqliteEnvironment(make_settings_db(tmp_path / "env.db"))
    with Runtime("memory://", recover_on_start=False) as rt:
        _add_tools(rt, tmp_path / "out.jsonl", tmp_path / "go", env)
        assert rt.run_plan(Plan.from_dict(PLAN), run_id="r").status == "ok"
        entry = _group(rt)
        specs = SpecsWithGroups(rt.catalog, {"settings": env})
        timed = specs.holding(entry)
        assert timed is not None and timed.timeout_s == 2 * MEMBER_TIMEOUT_S
