"""Cursors are bound to the query, the tool, the run and the key that minted them.

A cursor comes back from the model: one it wrote itself, one another query or run was given, or
one edited to jump elsewhere is refused with ``invalid_arguments``, never followed.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Runtime, ToolCall, ToolResult
from actionspace.errors import ToolError
from actionspace.observation import pagination
from actionspace.observation.pagination import decode_cursor, encode_cursor, page


def _plain(position: dict[str, Any]) -> str:
    """A cursor as the old format wrote it: base64 of the position, no seal."""
    return base64.urlsafe_b64encode(json.dumps(position).encode()).decode().rstrip("=")


def _refused(cursor: str, **kwargs: Any) -> str:
    with pytest.raises(ToolError) as caught:
        decode_cursor(cursor, **kwargs)
    assert caught.value.error.category == "invalid_arguments"
    return str(caught.value)


def test_a_cursor_written_by_hand_is_refused() -> None:
    assert "start again without one" in _refused(_plain({"id": 990}))


def test_an_edited_cursor_is_refused() -> None:
    good = encode_cursor({"id": 10})
    raw = json.loads(base64.urlsafe_b64decode(good + "=" * (-len(good) % 4)))
    raw["p"] = {"id": 990}
    forged = base64.urlsafe_b64encode(json.dumps(raw).encode()).decode()
    _refused(forged)


def test_a_cursor_of_another_query_is_refused_and_its_own_is_read() -> None:
    cursor = encode_cursor({"offset": 20}, query={"region": "eu"})
    assert decode_cursor(cursor, query={"region": "eu"}) == {"offset": 20}
    assert "another query" in _refused(cursor, query={"region": "us"})
    _refused(cursor)


def test_a_cursor_of_another_run_or_tool_or_key_is_refused() -> None:
    key = pagination.CursorKey()
    with pagination.cursor_scope(key, run_id="r1", tool="list"):
        cursor = encode_cursor({"offset": 20})
        assert decode_cursor(cursor) == {"offset": 20}
    with pagination.cursor_scope(key, run_id="r2", tool="list"):
        _refused(cursor)
    with pagination.cursor_scope(key, run_id="r1", tool="other"):
        _refused(cursor)
    with pagination.cursor_scope(pagination.CursorKey(), run_id="r1", tool="list"):
        _refused(cursor)
    _refused(cursor)  # outside any scope: the process key, no run


def _runtime() -> Runtime:
    rt = Runtime("memory://")

    @rt.tool(effect="read")
    def list_rows(region: str, cursor: str | None = None) -> ToolResult:
        """List rows of a region, a page at a time."""
        start = int(decode_cursor(cursor, query={"region": region})["offset"]) if cursor else 0
        more = start + 10 < 50
        return page(
            [{"n": n, "region": region} for n in range(start, min(start + 10, 50))],
            cursor=encode_cursor({"offset": start + 10}, query={"region": region}) if more else None,
            after=cursor,
        )

    return rt


def test_through_the_runtime_a_forged_or_foreign_cursor_is_invalid_arguments() -> None:
    rt = _runtime()
    first = rt.call(ToolCall(name="list_rows", arguments={"region": "eu"}), run_id="r1")
    assert first.ok and first.cursor is not None
    second = rt.call(
        ToolCall(name="list_rows", arguments={"region": "eu", "cursor": first.cursor}), run_id="r1"
    )
    assert second.ok and second.data["items"][0]["n"] == 10
    for bad in (_plain({"offset": 40}), first.cursor[:-2] + "xx"):
        obs = rt.call(ToolCall(name="list_rows", arguments={"region": "eu", "cursor": bad}), run_id="r1")
        assert obs.error is not None and obs.error.category == "invalid_arguments", obs
    other = rt.call(
        ToolCall(name="list_rows", arguments={"region": "us", "cursor": first.cursor}), run_id="r1"
    )
    assert other.error is not None and other.error.category == "invalid_arguments"


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=80))
def test_any_text_as_a_cursor_is_refused_as_invalid_arguments_never_an_exception(text: str) -> None:
    with pytest.raises(ToolError) as caught:
        decode_cursor(text)
    assert caught.value.error.category == "invalid_arguments"


@settings(max_examples=100, deadline=None)
@given(
    position=st.dictionaries(
        st.sampled_from(["id", "at", "k"]), st.integers() | st.text(max_size=8), max_size=3
    ),
    query=st.dictionaries(st.sampled_from(["region", "q"]), st.text(max_size=8), max_size=2),
)
def test_a_cursor_round_trips_under_its_own_query(position: dict[str, Any], query: dict[str, Any]) -> None:
    assert decode_cursor(encode_cursor(position, query=query), query=query) == position
