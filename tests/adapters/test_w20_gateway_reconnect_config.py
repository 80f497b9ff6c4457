"""The gateway's config file sets how an upstream server that went away is connected to again (an
``[[upstreams]]`` table's ``reconnect``), checked before anything is served; the gateway connects under it
(a real upstream server: ``test_w19_mcp_restarts_program.py`` over stdio)."""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.adapters._gateway_config import load_config, parse_config
from actionspace.adapters.mcp_client import Reconnect
from actionspace.adapters.mcp_gateway import Gateway
from actionspace.errors import ConfigurationError
from tests.adapters.test_w19_mcp_reconnects import PROGRAM, Server, wait_for

KEYS = (
    "attempts",
    "initial_backoff_s",
    "backoff_multiplier",
    "max_backoff_s",
    "cooldown_s",
    "unanswered",
    "idle_probe_s",
)


def upstream(reconnect: str, server: Server | None = None) -> str:
    env = (
        ""
        if server is None
        else f"env = {{ W19_NOTES = {str(server.notes)!r}, W19_PLAN = {str(server.plan)!r} }}\n"
    )
    return (
        f'[[upstreams]]\nname = "lab"\ncommand = [{sys.executable!r}, {PROGRAM!r}, "stdio"]\n'
        f"allowlisted = true\n{env}{reconnect}"
    )


def parsed(text: str, tmp_path: Path) -> Any:
    path = tmp_path / "g.toml"
    path.write_text(text, encoding="utf-8")
    return load_config(path, environ={})


def test_an_upstream_reconnects_under_the_defaults_unless_its_table_says_otherwise(tmp_path: Path) -> None:
    assert parsed(upstream(""), tmp_path).upstreams[0].reconnect == Reconnect()
    assert parsed(upstream("reconnect = true\n"), tmp_path).upstreams[0].reconnect == Reconnect()
    assert parsed(upstream("reconnect = false\n"), tmp_path).upstreams[0].reconnect is None
    text = upstream(
        "reconnect = { attempts = 2, initial_backoff_s = 1, backoff_multiplier = 3, max_backoff_s = 9.5, "
        "cooldown_s = inf, unanswered = 4, idle_probe_s = 15 }\n"
    )
    assert parsed(text, tmp_path).upstreams[0].reconnect == Reconnect(
        attempts=2,
        initial_backoff_s=1,
        backoff_multiplier=3,
        max_backoff_s=9.5,
        cooldown_s=math.inf,
        unanswered=4,
        idle_probe_s=15,
    )
    table = upstream("[upstreams.reconnect]\nattempts = 7\n")
    assert parsed(table, tmp_path).upstreams[0].reconnect == Reconnect(attempts=7)


@pytest.mark.parametrize(
    ("reconnect", "complaint"),
    [
        ("reconnect = 3", "true, false or a table"),
        ('reconnect = "never"', "true, false or a table"),
        ("reconnect = { attempt = 3 }", "unknown key"),
        ("reconnect = { attempts = 0 }", "attempts"),
        ("reconnect = { attempts = 2.5 }", "attempts"),
        ("reconnect = { initial_backoff_s = -1 }", "initial_backoff_s"),
        ("reconnect = { backoff_multiplier = 0.5 }", "backoff_multiplier"),
        ("reconnect = { max_backoff_s = nan }", "max_backoff_s"),
        ("reconnect = { cooldown_s = -1 }", "cooldown_s"),
        ('reconnect = { cooldown_s = "1m" }', "cooldown_s"),
        ("reconnect = { unanswered = 0 }", "unanswered"),
        ("reconnect = { idle_probe_s = 0 }", "idle_probe_s"),
        ("reconnect = { idle_probe_s = true }", "idle_probe_s"),
    ],
)
def test_a_bad_reconnect_setting_is_refused_naming_the_upstream(
    reconnect: str, complaint: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigurationError, match=complaint) as caught:
        parsed(upstream(reconnect + "\n"), tmp_path)
    assert "lab" in str(caught.value)


_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@given(
    st.one_of(
        _VALUES,
        st.dictionaries(st.sampled_from((*KEYS, "attempt", "cooldown", "")), _VALUES, max_size=4),
    )
)
def test_any_reconnect_value_gives_a_policy_or_a_configuration_error(value: Any) -> None:
    raw = {"upstreams": [{"name": "lab", "command": ["x"], "reconnect": value}]}
    try:
        config = parse_config(raw, base=Path("."), environ={})
    except ConfigurationError:
        return
    got = config.upstreams[0].reconnect
    if value is False:
        assert got is None
    elif value is True:
        assert got == Reconnect()
    else:
        assert isinstance(value, dict) and got == Reconnect(**value)


def test_the_gateway_connects_its_upstream_under_the_files_reconnect(tmp_path: Path) -> None:
    server = Server(tmp_path / "notes.txt", tmp_path / "plan.txt")
    text = upstream("reconnect = { attempts = 2, initial_backoff_s = 0.05, cooldown_s = inf }\n", server)
    config = parsed(text, tmp_path)
    gateway = Gateway(config, runtime=Runtime("memory://", recover_on_start=False))
    try:
        gateway.open_upstreams()
        assert gateway._toolsets[0].server.reconnect == config.upstreams[0].reconnect
        server.next_start("die")  # every later start dies before the handshake is answered
        server.kill_stdio()
        wait_for(lambda: len(server.lines("start die")) >= 2)
        time.sleep(1.0)  # a third attempt would be due well within this
        assert len(server.lines("start die")) == 2
    finally:
        gateway.close()
        gateway.runtime.close()


def test_a_gateway_upstream_with_reconnect_false_is_left_down(tmp_path: Path) -> None:
    server = Server(tmp_path / "notes.txt", tmp_path / "plan.txt")
    gateway = Gateway(
        parsed(upstream("reconnect = false\n", server), tmp_path),
        runtime=Runtime("memory://", recover_on_start=False),
    )
    try:
        gateway.open_upstreams()
        assert gateway._toolsets[0].server.reconnect is None
        server.kill_stdio()
        time.sleep(1.0)  # the default would start it again at once
        assert len(server.lines("start ")) == 1
    finally:
        gateway.close()
        gateway.runtime.close()
