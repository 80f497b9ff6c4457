"""A run this process holds in memory, whose stored state another process then saved in a form
this process cannot read (a newer actionspace's format, or a row another writer damaged): the
next call here stops with :class:`~actionspace.errors.RunStateError`, as opening the run does.

Before, the read before each call of a live run swallowed the error and the call went on with
the state this process held: a secret the other process read in the run (its label part of the
row it saved) blocked nothing here, and the secret was sent.

The other process is a real one: it reads the secret in the run and saves the run's state; then
the row is rewritten the way a newer version (or a broken writer) leaves it.
"""

from __future__ import annotations

import asyncio
import json
import textwrap
from collections.abc import Callable
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.errors import RunStateError
from tests.proc import RunStateRows, run_child
from tests.proc import url as url  # the fixture

PASSWORD = "hunter2-correct-horse"

_READ_SECRET = textwrap.dedent(
    """
    import sys
    from actionspace import Labels, Runtime

    rt = Runtime(sys.argv[1], recover_on_start=False)

    @rt.tool(effect="read", labels=Labels(confidentiality="secret"))
    def read_password() -> str:
        "Read the stored password."
        return "hunter2-correct-horse"

    assert rt.call({"name": "read_password", "arguments": {}}, run_id="conv").ok
    assert rt.context_label("conv").secret
    rt.close()
    print('{"read": true}', flush=True)
    """
)


def _newer_format(text: str) -> str:
    state = json.loads(text)
    state["v"] = state.get("v", 1) + 1
    return json.dumps(state)


DAMAGES: dict[str, Callable[[str], str]] = {
    "a_newer_format": _newer_format,
    "cut_short": lambda text: text[: len(text) // 2],
}


@pytest.fixture
def rows(url: str) -> RunStateRows:
    return RunStateRows(url)


def _runtime(url: str, sent: list[str]) -> Runtime:
    rt = Runtime(url, recover_on_start=False)

    @rt.tool(effect="read")
    def look(who: str) -> str:
        """Look someone up."""
        return who

    @rt.tool(effect="external")
    def send_email(recipient: str, body: str) -> str:
        """Send an email."""
        sent.append(body)
        return "sent"

    return rt


@pytest.mark.parametrize(("damage", "mode"), [("a_newer_format", "sync"), ("cut_short", "async")])
def test_a_live_run_whose_stored_state_became_unreadable_stops_with_a_typed_error(
    rows: RunStateRows, damage: str, mode: str
) -> None:
    sent: list[str] = []
    rt = _runtime(rows.url, sent)
    try:
        assert rt.call({"name": "look", "arguments": {"who": "ana"}}, run_id="conv").ok  # live here
        assert run_child(_READ_SECRET, rows.url) == {"read": True}
        left = rows.change("conv", DAMAGES[damage])

        email: dict[str, Any] = {
            "name": "send_email",
            "arguments": {"recipient": "eve@x.com", "body": PASSWORD},
        }
        with pytest.raises(RunStateError, match="'conv'"):
            if mode == "sync":
                rt.call(email, run_id="conv")
            else:
                asyncio.run(rt.acall(email, run_id="conv"))
        with pytest.raises(RunStateError):
            rt.context_label("conv")
        assert sent == []
        assert rows.get("conv") == left  # left for a person: nothing was written over it
    finally:
        rt.close()


def test_a_live_run_still_goes_on_when_its_stored_state_reads_back(rows: RunStateRows) -> None:
    """The stop is for a row that cannot be read: one another process saved readably is merged."""
    sent: list[str] = []
    rt = _runtime(rows.url, sent)
    try:
        assert rt.call({"name": "look", "arguments": {"who": "ana"}}, run_id="conv").ok
        assert run_child(_READ_SECRET, rows.url) == {"read": True}
        email = {"name": "send_email", "arguments": {"recipient": "eve@x.com", "body": PASSWORD}}
        obs = rt.call(email, run_id="conv")
        assert obs.error is not None and obs.error.category == "policy_violation", obs
        assert sent == []
    finally:
        rt.close()
