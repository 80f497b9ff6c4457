"""Continuing a gateway run as an attacker would: a ``_meta`` run id that is not text, a label
naming a run another principal (same id, another tenant) opened, ids of other prefixes. Each is
refused as a typed error (or kept apart), and nothing runs in a run that is not the caller's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.shared.exceptions import MCPError

from actionspace import Runtime
from actionspace.adapters.mcp_gateway import NODE_META, RUN_META, Gateway
from actionspace.errors import ActionError
from tests.adapters.gateway_sample_tools import DB_ENV, count
from tests.adapters.gateway_support import HERE, error_of, run_of, store_url

_ARGS = {"customer_id": "c19", "title": "written once"}


def _config(tenant: str) -> str:
    return f"""
[gateway]
name = "desk"
pythonpath = [{str(HERE)!r}]

[[tools]]
import = "gateway_sample_tools:DESK"

[[principals]]
id = "alice"
token = "alice-token-0123456789"
tenant = "{tenant}"
scopes = ["read:*", "write:create_ticket"]

[[principals]]
id = "bob"
token = "bob-token-0123456789ab"
scopes = ["read:*", "write:create_ticket"]
"""


def _gateway(tmp_path: Path, tenant: str = "acme", url: str | None = None) -> Gateway:
    runtime = Runtime(url or store_url(tmp_path), recover_on_start=False)
    return Gateway.from_toml(_config(tenant), runtime=runtime, base=tmp_path)


def _write(gw: Gateway, who: str, session: str, meta: Any) -> Any:
    principal = gw.config.principal_by_id(who)
    assert principal is not None
    return anyio.run(gw.serve_call, principal, session, "create_ticket", _ARGS, meta)


@pytest.fixture
def desk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(DB_ENV, str(tmp_path / "desk.db"))
    return str(tmp_path / "desk.db")


@pytest.mark.parametrize(
    "wrap",
    [
        pytest.param(lambda r: [r], id="list"),
        pytest.param(lambda r: {"id": r}, id="object"),
        pytest.param(lambda r: 19, id="number"),
        pytest.param(lambda r: True, id="boolean"),
        pytest.param(lambda r: [r] * 50_000, id="huge-list"),
    ],
)
def test_w19_a_run_id_that_is_not_text_is_refused_and_the_write_is_not_sent_again(
    tmp_path: Path, desk: str, wrap: Any
) -> None:
    gw = _gateway(tmp_path, url="memory://")
    try:
        first = _write(gw, "alice", "before", None)
        assert not first.is_error, first
        run_id = run_of(first)
        # a reconnecting client that means to continue its run, its id sent in another shape:
        # serving it in a new run would send the write a second time
        again = _write(gw, "alice", "after", {RUN_META: wrap(run_id)})
        error = error_of(again)
        assert error["category"] == "permission_denied", error
        assert len(error["message"]) < 400
        assert count("tickets", desk) == 1
        alice = gw.config.principal_by_id("alice")
        assert alice is not None
        with pytest.raises(MCPError, match="permission_denied"):
            anyio.run(gw.serve_list, alice, "after", {RUN_META: wrap(run_id)})
        # null is no run named: the session's own run, as without _meta
        own = _write(gw, "alice", "after", {RUN_META: None})
        assert not own.is_error and run_of(own) != run_id
    finally:
        gw.runtime.close()


def test_w19_a_label_of_a_principal_whose_tenant_changed_does_not_reach_the_old_tenants_run(
    tmp_path: Path, desk: str
) -> None:
    before = _gateway(tmp_path, "acme")
    try:
        first = _write(before, "alice", "s1", {RUN_META: "nightly", NODE_META: "open"})
        assert not first.is_error, first
        run_id = run_of(first)
    finally:
        before.runtime.close()
    after = _gateway(tmp_path, "globex")  # the id "alice" now names a principal of another tenant
    try:
        by_label = _write(after, "alice", "s2", {RUN_META: "nightly", NODE_META: "open"})
        error = error_of(by_label)
        assert error["category"] == "permission_denied", error
        # the same answer as for naming the run by its id (already refused before)
        by_id = error_of(_write(after, "alice", "s3", {RUN_META: run_id, NODE_META: "open"}))
        assert by_id["category"] == "permission_denied"
        assert by_id["message"] == error["message"]
        assert count("tickets", desk) == 1
    finally:
        after.runtime.close()
    again = _gateway(tmp_path, "acme")  # the principal that opened it still continues it by label
    try:
        mine = _write(again, "alice", "s4", {RUN_META: "nightly", NODE_META: "open"})
        assert not mine.is_error and run_of(mine) == run_id
        assert mine.structured_content is not None
        assert mine.structured_content["diagnostics"].get("replayed")
    finally:
        again.runtime.close()


def test_w19_a_run_of_another_prefix_is_a_label_of_the_callers_own(tmp_path: Path, desk: str) -> None:
    gw = _gateway(tmp_path, url="memory://")
    try:
        bob = gw.config.principal_by_id("bob")
        assert bob is not None
        theirs = gw.runtime.new_run("run_0123456789abcdef", principal=bob)
        mine = _write(gw, "alice", "s", {RUN_META: theirs})
        assert not mine.is_error and run_of(mine) != theirs
        assert run_of(mine).startswith("mcp_alice_run_0123456789abcdef_")
        assert gw.runtime.run_state(run_of(mine)).principal.id == "alice"
    finally:
        gw.runtime.close()


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("w19-continuation")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(DB_ENV, str(folder / "desk.db"))
        gw = _gateway(folder, url="memory://")
        alice = gw.config.principal_by_id("alice")
        assert alice is not None
        label = gw.run_for(alice, "b", {RUN_META: "nightly"})
        gw.runtime.run_state(label, alice)  # opened, as the first call in it does
        yield gw, {"<session>": gw.run_for(alice, "a", None), "<label>": label}
        gw.runtime.close()


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    named=st.sampled_from(["<session>", "<label>", "nightly", "mcp_", ""])
    | st.text(max_size=40)
    | st.text(max_size=40).map(lambda t: "mcp_" + t)
    | st.integers()
    | st.floats()
    | st.lists(st.sampled_from(["<session>", "<label>"]), max_size=2)
    | st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2),
    session=st.sampled_from(["s1", "s2", None]),
)
def test_w19_bob_naming_anything_never_lands_in_a_run_alice_opened(
    shared: tuple[Gateway, dict[str, str]], named: Any, session: str | None
) -> None:
    gw, opened = shared
    bob = gw.config.principal_by_id("bob")
    assert bob is not None
    if isinstance(named, str):
        named = opened.get(named, named)
    elif isinstance(named, list):
        named = [opened[n] for n in named]
    found = gw.runs.run_for(bob, session, {RUN_META: named})
    if isinstance(found, ActionError):
        assert found.category == "permission_denied"
    else:
        assert found not in opened.values()
        # and the session is not left bound to anything of alice's
        assert gw.runs.run_for(bob, session, None) not in opened.values()
