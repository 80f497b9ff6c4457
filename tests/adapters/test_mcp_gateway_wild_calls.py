"""Whatever an MCP client puts in a ``tools/call`` — any tool name, any arguments, any ``_meta`` —
the gateway answers with a result: ok, or an error whose category is the runtime's, never
``internal`` (a failure of ours); and a side effect runs only with arguments its schema accepts."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import CATEGORIES, Runtime
from actionspace.adapters.mcp_gateway import NODE_META, RUN_META, Gateway
from tests.adapters.gateway_sample_tools import DB_ENV
from tests.adapters.gateway_support import write_config
from tests.text_strategies import any_text, wild_json

_names = st.sampled_from(
    ["create_ticket", "lookup_customer", "send_refund", "purge_desk", "customer_id", "", "create_ticket@1"]
)
_words = _names | st.sampled_from(["title", "cents", NODE_META, RUN_META]) | any_text
_wild = wild_json(_words)
_ticket = st.fixed_dictionaries(
    {},
    optional={
        "customer_id": st.sampled_from(["c1", "c42", "x1", "", "c1\n"]) | _wild,
        "title": st.sampled_from(["broken printer", "ab", "x" * 81]) | _wild,
    },
)
"""Arguments of the sample desk's ``create_ticket``: some valid, most not."""
_arguments = st.none() | _ticket | st.dictionaries(_words, _wild, max_size=4)
_meta = st.none() | st.dictionaries(_words, _wild, max_size=3)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("wild-gateway")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(DB_ENV, str(folder / "desk.db"))
        gw = Gateway.from_file(write_config(folder), runtime=Runtime("memory://", recover_on_start=False))
        yield gw, folder / "desk.db"
        gw.runtime.close()


def _tickets(db: Path) -> list[tuple[Any, ...]]:
    if not db.exists():
        return []
    with sqlite3.connect(db) as conn:
        try:
            return list(conn.execute("SELECT * FROM tickets"))
        except sqlite3.OperationalError:  # no ticket written yet: no table
            return []


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(name=_names | _words, arguments=_arguments, meta=_meta, session=st.sampled_from(["s1", "s2"]))
def test_any_tools_call_is_answered_with_a_typed_result(
    gateway: tuple[Gateway, Path], name: str, arguments: dict[str, Any] | None, meta: Any, session: str
) -> None:
    gw, db = gateway
    alice = gw.config.principal_by_id("alice")
    assert alice is not None
    before = len(_tickets(db))
    result = anyio.run(gw.serve_call, alice, session, name, arguments, meta)  # run_for refuses some _meta
    if result.is_error:
        assert result.structured_content is not None, result
        error = result.structured_content["error"]
        assert error["category"] in CATEGORIES and error["category"] != "internal", error
    written = _tickets(db)[before:]
    if written:  # only a create_ticket its schema accepts writes, and once
        tool = name.partition("@")[0]  # a name may pin the version: create_ticket@1
        assert tool == "create_ticket" and not result.is_error and len(written) == 1, (written, result)
        _id, customer, title = written[0]
        assert re.fullmatch(r"c\d+", customer) and 3 <= len(title) <= 80, written
