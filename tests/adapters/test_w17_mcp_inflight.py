"""How the stdio transport matches a server's answers to the requests in flight (``_mcp_inflight``), as
its line reader hands them to the session: an answer under the exact id of a request is its answer; one
under an id the SDK would coerce to it (``"1"``, ``" 1"``, ``"+1"``) ends it as malformed, never with
the forged result; one without an id answers the only request in flight (not a ``subscriptions/listen``
stream), and nothing when several are. The whole path, with a real server process, is in
``test_w17_mcp_answer_ids.py``."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
from hypothesis import given
from hypothesis import strategies as st
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.message import SessionMessage

from actionspace.adapters._mcp_errors import MALFORMED_ANSWER
from actionspace.adapters._mcp_inflight import MAX_ASKED, Asked
from actionspace.adapters._mcp_stdio import _Lines

_INT_IDS = st.integers(0, 2**53)
_RESULT = {"content": [{"type": "text", "text": "forged"}]}


def _asked(*ids: int | str, method: str = "tools/call") -> Asked:
    asked = Asked()
    for request_id in ids:
        asked.sent(types.JSONRPCRequest(jsonrpc="2.0", id=request_id, method=method))
    return asked


def _read(asked: Asked, members: dict[str, Any]) -> list[SessionMessage | Exception]:
    return list(_Lines(1 << 20, asked).feed(json.dumps(members).encode() + b"\n"))


def _answers(got: list[SessionMessage | Exception]) -> list[types.JSONRPCResponse | types.JSONRPCError]:
    return [
        item.message
        for item in got
        if isinstance(item, SessionMessage)
        and isinstance(item.message, types.JSONRPCResponse | types.JSONRPCError)
    ]


def _loose(request_id: int) -> st.SearchStrategy[str]:
    """Strings the SDK reads as ``request_id``."""
    return st.sampled_from(
        [str(request_id), f" {request_id}", f"+{request_id}", f"{request_id}\n", f"0{request_id}"]
    )


@given(data=st.data(), ids=st.lists(_INT_IDS, min_size=1, max_size=5, unique=True))
def test_an_answer_under_an_id_of_another_type_ends_its_request_as_malformed(
    data: st.DataObject, ids: list[int]
) -> None:
    meant = data.draw(st.sampled_from(ids))
    answered = data.draw(_loose(meant))
    assert coerce_request_id(answered) == meant  # the SDK would take it as the answer
    asked = _asked(*ids)
    (answer,) = _answers(_read(asked, {"jsonrpc": "2.0", "id": answered, "result": _RESULT}))
    assert isinstance(answer, types.JSONRPCError) and answer.id == meant and type(answer.id) is int
    assert answer.error.code == MALFORMED_ANSWER
    assert len(asked) == len(ids) - 1  # that request is answered: a true answer after it is late
    (late,) = _answers(_read(asked, {"jsonrpc": "2.0", "id": meant, "result": _RESULT}))
    assert isinstance(late, types.JSONRPCResponse)  # handed on as it came: the session drops it


@given(ids=st.lists(st.one_of(_INT_IDS, st.text(max_size=8)), min_size=1, max_size=5, unique=True))
def test_an_answer_under_its_exact_id_is_taken_as_it_came(ids: list[int | str]) -> None:
    asked = _asked(*ids)
    for request_id in ids:
        (answer,) = _answers(_read(asked, {"jsonrpc": "2.0", "id": request_id, "result": _RESULT}))
        assert isinstance(answer, types.JSONRPCResponse) and answer.id == request_id
        assert type(answer.id) is type(request_id) and answer.result == _RESULT
    assert len(asked) == 0


_UNNAMED = st.sampled_from(
    [
        ({"id": None, "error": {"code": -32700, "message": "Parse error"}}, -32700),
        ({"id": None, "error": {"code": -32600, "message": "Invalid request"}}, -32600),
        ({"id": None, "error": {"code": -32603, "message": "boom"}}, MALFORMED_ANSWER),
        ({"error": {"code": -32700, "message": "Parse error"}}, MALFORMED_ANSWER),
        ({"id": None, "result": _RESULT}, MALFORMED_ANSWER),
        ({"result": _RESULT}, MALFORMED_ANSWER),
    ]
)


@given(unnamed=_UNNAMED, request_id=_INT_IDS, listening=st.booleans())
def test_an_answer_without_an_id_answers_the_one_request_in_flight(
    unnamed: tuple[dict[str, Any], int], request_id: int, listening: bool
) -> None:
    members, code = unnamed
    asked = _asked(request_id)
    if listening:  # an open listen stream is no request an id-less answer belongs to
        asked.sent(types.JSONRPCRequest(jsonrpc="2.0", id="listen-1", method="subscriptions/listen"))
    (answer,) = _answers(_read(asked, {"jsonrpc": "2.0", **members}))
    assert isinstance(answer, types.JSONRPCError) and answer.id == request_id
    assert answer.error.code == code


@given(unnamed=_UNNAMED, ids=st.lists(_INT_IDS, max_size=4, unique=True).filter(lambda i: len(i) != 1))
def test_an_answer_without_an_id_answers_nothing_unless_one_request_is_in_flight(
    unnamed: tuple[dict[str, Any], int], ids: list[int]
) -> None:
    asked = _asked(*ids)
    got = _read(asked, {"jsonrpc": "2.0", **unnamed[0]})
    assert _answers(got) == [] and len(got) == 1 and isinstance(got[0], ValueError)
    assert len(asked) == len(ids)  # each still waits for its own answer (or its timeout)


def test_a_cancelled_request_is_no_longer_in_flight_and_the_record_is_bounded() -> None:
    asked = _asked(1, 2)
    asked.sent(
        types.JSONRPCNotification(jsonrpc="2.0", method="notifications/cancelled", params={"requestId": 1})
    )
    (answer,) = _answers(
        _read(asked, {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "x"}})
    )
    assert answer.id == 2  # request 1 was given up: 2 is the only one left
    many = _asked(*range(MAX_ASKED + 10))
    assert len(many) == MAX_ASKED


_HOSTILE_IDS = st.one_of(
    st.none(),
    st.booleans(),
    st.floats(allow_nan=False),
    st.integers(-(2**80), 2**80),
    st.text(max_size=30),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@given(
    answered=_HOSTILE_IDS,
    ids=st.lists(st.one_of(_INT_IDS, st.text(max_size=5)), max_size=4, unique=True),
    body=st.sampled_from(
        ['"result": {}', '"result": 1', '"error": {"code": 1, "message": "m"}', '"error": 5']
    ),
    junk=st.binary(max_size=20).map(lambda b: b.replace(b"\n", b"")),
)
def test_any_answer_id_ends_typed_and_never_passes_for_a_request_of_another_id(
    answered: Any, ids: list[int | str], body: str, junk: bytes
) -> None:
    asked = _asked(*ids)
    line = (
        junk + b'{"jsonrpc": "2.0", "id": ' + json.dumps(answered).encode() + b", " + body.encode() + b"}\n"
    )
    got = list(_Lines(1 << 20, asked).feed(line))
    assert all(isinstance(item, SessionMessage | Exception) for item in got)
    for answer in _answers(got):
        if isinstance(answer, types.JSONRPCResponse):  # a result is taken only under an exact id
            assert type(answer.id) is type(answered) and answer.id == answered


_ID_TEXT = st.one_of(
    st.sampled_from([b"\\q", b"\\u12", b"\\", b"a\\x0"]),
    st.binary(max_size=12).map(lambda b: b.replace(b'"', b"").replace(b"\n", b"")),
)
"""What a hostile server writes between the quotes of an id: ``\\q`` is no JSON string."""


@given(
    raw=_ID_TEXT, size=st.integers(1_001, 3_000), piece=st.integers(64, 700), starts=st.integers(100, 2000)
)
def test_a_line_naming_an_id_json_cannot_read_never_ends_the_reader(
    raw: bytes, size: int, piece: int, starts: int
) -> None:
    # an oversized line (refused by the id near its start) and a line of more glued starts than its
    # budget (its untried rest searched for ids): both read the id with the bytes as they are
    oversized = b'{"jsonrpc":"2.0","id":"' + raw + b'","result":"' + b"a" * size + b'"}\n'
    glued = b"x" + b'{"id":1,' * starts + b'{"id":"' + raw + b'"\n'
    asked = _asked(1, "1")
    for line, limit in ((oversized, 1_000), (glued, 1 << 20)):
        lines = _Lines(limit, asked)
        got = [item for at in range(0, len(line), piece) for item in lines.feed(line[at : at + piece])]
        assert got and all(isinstance(item, SessionMessage | Exception) for item in got)
