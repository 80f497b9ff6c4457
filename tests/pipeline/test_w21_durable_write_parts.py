"""What the write frame (pipeline/_write.py) now writes out ends as the code it replaced.

- The committed entry is set slot by slot: equal, field by field, to ``LedgerEntry.evolve`` of the
  intent's entry with the commit's changes, over generated entries and outcomes.
- A call's plain records go to the store without ``Recorder.flush`` when nothing needs a label;
  a tool's value of a plain exact type skips ``inspect.isawaitable``; the payloads' texts made
  once per tool spec: with the frame on and off, over generated write tools (sync, returning an
  ``int``, a ``bool``, an ``IntEnum``, a text, a dict, ``None``, or a coroutine from a sync
  wrapper; labels under every built-in policy, run labels with readers or secret) and generated
  calls, on SQLite and in memory: the same observations, events as read back, whole ledger entries
  (but their clocks), flow state, and on SQLite the stored rows' texts byte for byte.
"""

from __future__ import annotations

import contextlib
import enum
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime, ToolCall
from actionspace.catalog import RetryPolicy
from actionspace.ledger.entries import LedgerEntry
from actionspace.ledger.memory import MemoryLedgerStore
from actionspace.pipeline._write_parts import committed
from actionspace.policy.labels import Label
from actionspace.types import Observation
from tests.pipeline.test_fast_effects import POLICIES
from tests.pipeline.test_w19_write_frame import SCHEMA, _strip, proposals
from tests.pipeline.test_w19_write_frame import _play as _played


class Level(enum.IntEnum):
    LOW = 1


@dataclass
class _Rec:
    """What ``committed`` reads of a recorder: its records, the run's numbers, the call id."""

    records: list[Any]
    run: Any
    call_id: str


@dataclass
class _Run:
    seq: Any


TEXTS = st.text(max_size=5)
JSON = st.none() | st.booleans() | st.integers(-5, 5) | TEXTS


@settings(max_examples=150, deadline=None)
@given(
    arguments=st.dictionaries(TEXTS, JSON, max_size=3),
    attempts=st.integers(1, 3),
    remote=st.none() | TEXTS,
    resolution=st.none() | st.dictionaries(TEXTS, JSON, max_size=2),
    observation=st.dictionaries(TEXTS, JSON, max_size=3),
    texted=st.booleans(),
)
def test_the_committed_entry_is_the_intents_evolved(
    arguments: dict[str, Any],
    attempts: int,
    remote: str | None,
    resolution: dict[str, Any] | None,
    observation: dict[str, Any],
    texted: bool,
) -> None:
    ledger = MemoryLedgerStore()
    entry = LedgerEntry(
        key="as1_" + "0" * 32,
        run_id="r",
        node_id="n",
        tool="put@1",
        args_digest="d" * 64,
        arguments=arguments,
        state="dispatched",
        attempts=attempts,
        created_at=1.5,
        updated_at=2.5,
        resolution=resolution,
    )
    ledger.begin(entry)
    diagnostics = {"idempotency_key": entry.key} | ({} if remote is None else {"remote_id": remote})
    obs = Observation(call_id="c", tool="put", data=1, diagnostics=diagnostics)
    rec = _Rec([], _Run(iter(range(100))), "c")
    assert committed(ledger, entry, obs, observation, rec, texted) is obs  # type: ignore[arg-type]
    stored = ledger.get(entry.key)
    assert stored is not None
    expected = entry.evolve(state="committed", observation=observation, remote_id=remote, error=None)
    got, want = stored.to_dict(), expected.to_dict()
    assert got.pop("updated_at") >= 2.5 and want.pop("updated_at") >= 2.5
    assert got == want
    [(_, kind, _, call_id, moved)] = rec.records
    assert (kind, call_id) == ("ledger", "c")
    assert dict(moved) == {"key": entry.key, "from": "dispatched", "to": "committed", "attempts": attempts}


ANSWERS = ["int", "bool", "enum", "text", "dict", "none", "coroutine"]


@dataclass(frozen=True)
class Tool:
    name: str
    answer: str
    native: bool
    confidentiality: str
    integrity: str


tools = st.builds(
    Tool,
    name=st.sampled_from(["w0", "w1", "w2"]),
    answer=st.sampled_from(ANSWERS),
    native=st.booleans(),
    confidentiality=st.sampled_from(["public", "public", "internal", "secret"]),
    integrity=st.sampled_from(["trusted", "untrusted"]),
)


def _value(answer: str, a: int) -> Any:
    return {
        "int": a,
        "bool": a % 2 == 0,
        "enum": Level.LOW,
        "text": f"t{a}",
        "dict": {"a": a},
        "none": None,
    }[answer]


def _runtime(url: str, shapes: list[Tool], policy: str, *, frame: bool) -> Runtime:
    rt = Runtime(url, recover_on_start=False, flow_policy=POLICIES[policy])
    for shape in shapes:
        answer = shape.answer

        def act(
            a: int, note: str = "", mode: str = "ok", idempotency_key: str = "", answer: str = answer
        ) -> Any:
            if answer == "coroutine":  # a sync wrapper handing back its coroutine

                async def later() -> int:
                    return a

                return later()
            return _value(answer, a)

        def bare(a: int, note: str = "", mode: str = "ok", answer: str = answer) -> Any:
            return act(a, note, mode, "", answer)

        rt.add_tool(
            name=shape.name,
            input_schema=SCHEMA,
            fn=act if shape.native else bare,
            effect="write",
            idempotency="native" if shape.native else "none",
            blocking=False,
            retry=RetryPolicy(max_attempts=1),
            labels={"confidentiality": shape.confidentiality, "integrity": shape.integrity},
        )
    rt.engine.messages.writes = frame
    return rt


_ROWS = "SELECT seq, kind, call_id, data FROM trace_events ORDER BY run_id, seq"


@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    shapes=st.lists(tools, min_size=1, max_size=3, unique_by=lambda t: t.name),
    calls=st.lists(proposals(), min_size=2, max_size=7),
    policy=st.sampled_from(list(POLICIES)),
    user=st.lists(st.sampled_from(["public", "internal", "secret"]), max_size=1),
    readers=st.booleans(),
    store=st.sampled_from(["memory", "sqlite"]),
)
def test_a_writes_written_out_parts_end_as_the_general_path_ends_them(
    tmp_path: Path,
    shapes: list[Tool],
    calls: list[tuple[ToolCall, str | None, bool]],
    policy: str,
    user: list[str],
    readers: bool,
    store: str,
) -> None:
    played, rows = [], []
    calls = [(c, n, False) for c, n, _ in calls]  # sync: the frame of pipeline/_write.py
    for frame in (True, False):
        url = "memory://"
        if store == "sqlite":
            url = f"sqlite:///{tmp_path / f'p{len(list(tmp_path.iterdir()))}.db'}"
        with _runtime(url, shapes, policy, frame=frame) as rt:
            if readers:  # a run label only some may read: every record is labelled
                run = rt.engine.run(rt.new_run("run-w"))
                run.flow.add_user_input("hi", Label(readers=frozenset({"ann"})))
            out = _played(rt, calls, user)
            out["observations"] = [_strip(o) for o in out["observations"]]
            played.append(out)
        if store == "sqlite":
            with contextlib.closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as db:
                found = db.execute(_ROWS).fetchall()
                rows.append([(q, k, c, re.sub("apr_[0-9a-f]+", "apr_*", d)) for q, k, c, d in found])
    assert played[0] == played[1]
    assert rows == [] or rows[0] == rows[1]


def test_a_sync_wrappers_coroutine_is_still_awaited(tmp_path: Path) -> None:
    """A value of a type outside the plain ones still goes through ``inspect.isawaitable``."""
    with _runtime(
        f"sqlite:///{tmp_path / 'c.db'}",
        [Tool("w0", "coroutine", False, "public", "trusted")],
        "default",
        frame=True,
    ) as rt:
        run = rt.new_run()
        out = [rt.call(ToolCall(name="w0", arguments={"a": i}), run_id=run) for i in range(3)]
    assert [(o.status, o.data) for o in out] == [("ok", 0), ("ok", 1), ("ok", 2)]
