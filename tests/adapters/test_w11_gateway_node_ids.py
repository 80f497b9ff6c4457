"""A client's ``_meta["actionspace/node_id"]`` names its logical action only as text.

MCP gives ``tools/call`` no idempotency key: a write's node is the node id the client gives, else
its tool and canonical arguments. A client that means two identical writes gives two node ids; a
node id that is not usable text (a number, a list, an object, an empty string) never silently
falls back to the arguments' identity, where the second write would be replayed and never sent:
the call is ``invalid_arguments`` and nothing is sent. ``null`` is the same as leaving it out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import anyio
import mcp_types as types
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from actionspace.adapters.mcp_gateway import NODE_META, Gateway
from tests.adapters.gateway_sample_tools import count
from tests.adapters.gateway_support import error_of, text_of

ARGS = {"customer_id": "c8", "title": "two identical tickets"}


def _tickets(tmp_path: Path) -> int:
    return count("tickets", str(tmp_path / "desk.db"))


def _calls(gateway: Gateway, metas: list[dict[str, Any]]) -> list[types.CallToolResult]:
    who = gateway.config.principal_by_id("alice")
    assert who is not None

    async def go() -> list[types.CallToolResult]:
        async with Client(gateway.server(lambda ctx: who), cache=None) as c:
            return [
                await c.call_tool("create_ticket", ARGS, meta=cast(types.RequestParamsMeta, meta))
                for meta in metas
            ]

    return anyio.run(go)


@pytest.mark.parametrize(
    "nodes", [(1, 2), (1.5, 2.5), (True, False), ([1], [2]), ({"n": 1}, {"n": 2}), ("", "")]
)
def test_node_ids_that_are_not_text_are_refused_never_folded_into_one_action(
    gateway: Gateway, tmp_path: Path, nodes: tuple[Any, Any]
) -> None:
    results = _calls(gateway, [{NODE_META: node} for node in nodes])
    for result in results:
        error = error_of(result)
        assert error["category"] == "invalid_arguments", error
        assert error["details"]["meta"] == NODE_META
    assert _tickets(tmp_path) == 0  # nothing sent: the client re-sends with text node ids
    texts = _calls(gateway, [{NODE_META: "first"}, {NODE_META: "second"}])
    assert not any(r.is_error for r in texts), [text_of(r) for r in texts]
    assert _tickets(tmp_path) == 2


def test_a_null_node_id_is_the_same_as_none(gateway: Gateway, tmp_path: Path) -> None:
    first, again = _calls(gateway, [{NODE_META: None}, {}])
    assert not first.is_error and not again.is_error, text_of(first)
    assert again.structured_content is not None and again.structured_content["diagnostics"]["replayed"]
    assert _tickets(tmp_path) == 1


_not_text = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.just(""),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6,
).filter(lambda v: v is not None)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(node=_not_text)
def test_any_node_id_that_is_not_text_sends_nothing(gateway: Gateway, tmp_path: Path, node: Any) -> None:
    before = _tickets(tmp_path)
    who = gateway.config.principal_by_id("alice")
    assert who is not None
    result = anyio.run(gateway.serve_call, who, "wild", "create_ticket", ARGS, {NODE_META: node})
    assert error_of(result)["category"] == "invalid_arguments"
    assert _tickets(tmp_path) == before
