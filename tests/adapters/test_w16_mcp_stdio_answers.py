"""Answers a stdio server sends against the protocol, as the transport's line reader hands them on.

A line the server left unended (a call cancelled while its answer was being written, a log line
without its newline) glues the next message to junk: the message is read whole, whatever the junk
and however the bytes arrive. An answer whose ``result`` is not an object, or that holds both a
result and an error, is a ``MALFORMED_ANSWER`` error for the request it names, not a line dropped
(its call would wait for its timeout) or an error under the server's own code. The whole path, with
a real server process, is in ``test_w16_mcp_hostile_ids.py``.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
from hypothesis import given
from hypothesis import strategies as st
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from actionspace.adapters._mcp_errors import MALFORMED_ANSWER, map_call_error
from actionspace.adapters._mcp_stdio import _Lines

_IDS = st.one_of(st.integers(-(2**53), 2**53), st.text(max_size=20))
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
_CONTENT = st.lists(
    st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=30)}), max_size=3
)


def _answer(request_id: int | str, content: list[dict[str, str]]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {"content": content}}).encode()


def _read(data: bytes, cuts: list[int]) -> list[SessionMessage | Exception]:
    lines, start = _Lines(1 << 20), 0
    got: list[SessionMessage | Exception] = []
    for cut in [*sorted({min(c, len(data)) for c in cuts}), len(data)]:
        got.extend(lines.feed(data[start:cut]))
        start = cut
    return got


def _messages(got: list[SessionMessage | Exception]) -> list[types.JSONRPCMessage]:
    return [item.message for item in got if isinstance(item, SessionMessage)]


_JUNK = st.one_of(
    st.binary(max_size=60).map(lambda b: b.replace(b"\n", b"")),
    # the realistic case: the first part of an answer whose writing was cut off
    st.builds(lambda i, c, n: _answer(i, c)[:n], _IDS, _CONTENT, st.integers(0, 200)),
)


@given(
    junk=_JUNK,
    request_id=_IDS,
    content=_CONTENT,
    cuts=st.lists(st.integers(0, 400), max_size=6),
)
def test_a_message_glued_to_an_unended_line_is_read_whole(
    junk: bytes, request_id: int | str, content: list[dict[str, str]], cuts: list[int]
) -> None:
    got = _read(junk + _answer(request_id, content) + b"\n", cuts)
    (message,) = _messages(got)
    assert isinstance(message, types.JSONRPCResponse), got
    assert message.id == request_id and message.result["content"] == content


@given(
    request_id=_IDS,
    result=_JSON.filter(lambda r: not isinstance(r, dict)),
    cuts=st.lists(st.integers(0, 200)),
)
def test_a_result_that_is_not_an_object_is_a_malformed_answer(
    request_id: int | str, result: Any, cuts: list[int]
) -> None:
    line = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode() + b"\n"
    _is_malformed(_read(line, cuts), request_id)


@given(request_id=_IDS, result=_JSON, code=st.integers(-(2**31), 2**31), first=st.booleans())
def test_an_answer_holding_a_result_and_an_error_is_a_malformed_answer(
    request_id: int | str, result: Any, code: int, first: bool
) -> None:
    error = {"code": code, "message": "both"}
    members: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
    members |= {"result": result, "error": error} if first else {"error": error, "result": result}
    _is_malformed(_read(json.dumps(members).encode() + b"\n", []), request_id)


def _is_malformed(got: list[SessionMessage | Exception], request_id: int | str) -> None:
    (message,) = _messages(got)
    assert isinstance(message, types.JSONRPCError) and message.id == request_id, got
    assert message.error.code == MALFORMED_ANSWER
    for side_effects, category in ((False, "permanent"), (True, "unknown_commit")):
        mapped = map_call_error(MCPError.from_error_data(message.error), side_effects=side_effects)
        assert (mapped.category, mapped.details["error"]) == (category, "malformed_answer")
        assert mapped.recovery and not mapped.retryable


def test_a_null_id_or_a_notification_is_no_answer_to_refuse() -> None:
    # a null id names no request; a result under "method" is a notification: neither answers a call
    for members in (
        {"jsonrpc": "2.0", "id": None, "result": "x"},
        {"jsonrpc": "2.0", "method": "m", "result": 1},
    ):
        got = _read(json.dumps(members).encode() + b"\n", [])
        assert not any(isinstance(m, types.JSONRPCError) for m in _messages(got)), got


def test_an_answer_nested_deeper_than_python_parses_is_handed_on_not_raised() -> None:
    # json.loads raises RecursionError (not a ValueError) where the types' own parser gives up
    deep = b"[" * 50_000 + b"]" * 50_000
    for members in (b'{"jsonrpc":"2.0","id":3,"result":' + deep + b"}", b"junk" + deep):
        got = _read(members + b"\n", [])
        assert got and all(isinstance(item, Exception | SessionMessage) for item in got), got
