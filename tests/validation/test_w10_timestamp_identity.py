"""Two spellings of one date-time value are one action; the tool still gets the text as written.

``2026-03-01T10:00:00Z``, ``…+00:00``, ``…+0000``, ``…t10:00:00.000z`` and ``…T10:00Z`` name the
same instant in the same offset: a re-proposal in another spelling must find the first one (same
node, same idempotency key, same argument digest), never send it twice. The same instant in another
offset (``12:00:00+02:00``) is another value, as a person would read it: another action.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Runtime, Timestamp, ToolCall
from actionspace.catalog import spec_from_schema
from actionspace.validation.validator import compile_tool, validate

SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "start": {"type": "string", "format": "date-time"},
        "extra": {"type": "array", "items": {"type": "string", "format": "date-time"}},
    },
    "required": ["title", "start"],
}

SAME = [
    "2026-03-01T10:00:00Z",
    "2026-03-01T10:00:00+00:00",
    "2026-03-01T10:00:00+0000",
    "2026-03-01T10:00:00+00",
    "2026-03-01t10:00:00z",
    "2026-03-01 10:00:00Z",
    "2026-03-01T10:00:00.000Z",
    "2026-03-01T10:00Z",
]


def timestamp_identity(text: str) -> str:
    """The identity form of a date-time (imported here: the end-to-end tests run without it)."""
    from actionspace.validation.forms import timestamp_identity as identity

    return identity(text)


def _schema_tool(rt: Runtime, got: list[dict[str, Any]]) -> None:
    def book(**kwargs: Any) -> str:
        got.append(kwargs)
        return f"booked {len(got)}"

    rt.add_tool(name="book", input_schema=SCHEMA, fn=book, effect="write", idempotency="none")


@pytest.mark.parametrize("fast", [True, False], ids=["precompiled", "stages"])
@pytest.mark.parametrize("other", SAME[1:])
def test_a_timestamp_respelled_is_the_same_action_and_is_not_sent_again(fast: bool, other: str) -> None:
    got: list[dict[str, Any]] = []
    with Runtime("memory://") as rt:
        rt.engine.fast.enabled = fast
        _schema_tool(rt, got)
        rt.new_run("r1")
        warm = rt.call(ToolCall(name="book", arguments={"title": "warm", "start": SAME[0]}), run_id="r1")
        first = rt.call(ToolCall(name="book", arguments={"title": "x", "start": SAME[0]}), run_id="r1")
        again = rt.call(ToolCall(name="book", arguments={"title": "x", "start": other}), run_id="r1")
    assert warm.ok and first.ok and again.ok
    assert again.diagnostics["idempotency_key"] == first.diagnostics["idempotency_key"]
    assert again.diagnostics.get("replayed") is True and again.data == first.data
    assert [kw["start"] for kw in got] == [SAME[0], SAME[0]]  # sent once, as written


def test_the_same_node_respelled_is_replayed_not_a_conflict() -> None:
    got: list[dict[str, Any]] = []
    with Runtime("memory://") as rt:
        _schema_tool(rt, got)
        args = {"title": "x", "start": "2026-03-01T10:00:00Z", "extra": ["2026-03-02T08:30:00.50+01:00"]}
        first = rt.call(ToolCall(name="book", arguments=args), run_id="r1", node_id="n1")
        respelled = {
            "title": "x",
            "start": "2026-03-01T10:00:00+00:00",
            "extra": ["2026-03-02T08:30:00.5+0100"],
        }
        again = rt.call(ToolCall(name="book", arguments=respelled), run_id="r1", node_id="n1")
    assert first.ok and again.ok, again.error
    assert again.diagnostics.get("replayed") is True
    assert len(got) == 1 and got[0]["extra"] == ["2026-03-02T08:30:00.50+01:00"]


@pytest.mark.parametrize(
    "other",
    [
        "2026-03-01T12:00:00+02:00",  # the same instant in another offset: another intent
        "2026-03-01T10:00:00-00:00",  # RFC 3339: the offset is unknown, not UTC
        "2026-03-01T10:00:00.000001Z",
        "2026-03-01T10:00:01Z",
    ],
)
def test_another_offset_or_another_instant_is_another_action(other: str) -> None:
    got: list[dict[str, Any]] = []
    with Runtime("memory://") as rt:
        _schema_tool(rt, got)
        first = rt.call(ToolCall(name="book", arguments={"title": "x", "start": SAME[0]}), run_id="r1")
        again = rt.call(ToolCall(name="book", arguments={"title": "x", "start": other}), run_id="r1")
    assert first.ok and again.ok
    assert again.diagnostics["idempotency_key"] != first.diagnostics["idempotency_key"]
    assert [kw["start"] for kw in got] == [SAME[0], other]


def test_a_typed_timestamp_parameter_respelled_is_the_same_action() -> None:
    got: list[datetime] = []
    with Runtime("memory://") as rt:

        @rt.tool(effect="write", idempotency="none")
        def remind(at: Timestamp, text: str) -> str:
            """Set a reminder."""
            got.append(at)
            return "set"

        first = rt.call(ToolCall(name="remind", arguments={"at": "2026-03-01T10:00:00Z", "text": "t"}))
        again = rt.call(ToolCall(name="remind", arguments={"at": "2026-03-01T10:00:00+00:00", "text": "t"}))
    assert first.ok and again.ok
    assert again.diagnostics["idempotency_key"] == first.diagnostics["idempotency_key"]
    assert got == [datetime(2026, 3, 1, 10, tzinfo=UTC)]


def test_a_marked_timestamp_in_a_schema_is_normalized_for_identity_only() -> None:
    schema = {
        "type": "object",
        "properties": {"at": {"type": "string", "x-actionspace": {"type": "timestamp"}}},
    }
    spec = spec_from_schema("at", schema, lambda at: at, effect="write")
    checked = validate(compile_tool(spec), {"at": "2026-03-01 10:00:00.10+0000"}, {}, None)
    assert checked.arguments == {"at": "2026-03-01T10:00:00.1Z"}
    assert checked.python_arguments == {"at": "2026-03-01 10:00:00.10+0000"}


def test_text_that_is_not_a_date_time_is_left_as_written() -> None:
    for text in ["tomorrow", "2026-03-01", "20260301T100000Z", "2026-03-01T10:00:00Z and more", ""]:
        assert timestamp_identity(text) == text


offsets = st.integers(min_value=-23 * 60 - 59, max_value=23 * 60 + 59).map(lambda m: timedelta(minutes=m))
moments = st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30))


def _spellings(moment: datetime, offset: timedelta, draw: Any) -> str:
    sign = "-" if offset < timedelta(0) else "+"
    hours, minutes = divmod(abs(offset).seconds // 60, 60)
    zone = draw(
        st.sampled_from(
            [f"{sign}{hours:02}:{minutes:02}", f"{sign}{hours:02}{minutes:02}"]
            + ([f"{sign}{hours:02}"] if minutes == 0 else [])
            + (["Z", "z", "+00:00", "+0000"] if not offset else [])
        )
    )
    sep = draw(st.sampled_from(["T", "t", " "]))
    clock = moment.strftime("%H:%M")
    if moment.second or moment.microsecond or draw(st.booleans()):
        clock += f":{moment.second:02}"
        if moment.microsecond or draw(st.booleans()):
            clock += "." + f"{moment.microsecond:06}" + "0" * draw(st.integers(0, 3))
    return f"{moment.date().isoformat()}{sep}{clock}{zone}"


@settings(max_examples=200, deadline=None)
@given(moment=moments, offset=offsets, data=st.data())
def test_any_two_spellings_of_one_value_share_an_identity_and_it_reads_back_as_that_value(
    moment: datetime, offset: timedelta, data: st.DataObject
) -> None:
    a = _spellings(moment, offset, data.draw)
    b = _spellings(moment, offset, data.draw)
    assert timestamp_identity(a) == timestamp_identity(b)
    assert datetime.fromisoformat(timestamp_identity(a)) == moment.replace(tzinfo=timezone(offset))
    assert timestamp_identity(timestamp_identity(a)) == timestamp_identity(a)


@settings(max_examples=200, deadline=None)
@given(a=moments, b=moments, oa=offsets, ob=offsets, data=st.data())
def test_two_values_differing_in_instant_or_offset_never_share_an_identity(
    a: datetime, b: datetime, oa: timedelta, ob: timedelta, data: st.DataObject
) -> None:
    if (a, oa) == (b, ob):
        return
    assert timestamp_identity(_spellings(a, oa, data.draw)) != timestamp_identity(
        _spellings(b, ob, data.draw)
    )


def test_digits_beyond_microseconds_are_kept_apart() -> None:
    assert timestamp_identity("2026-03-01T10:00:00.1234567Z") != timestamp_identity(
        "2026-03-01T10:00:00.1234568Z"
    )
    assert timestamp_identity("2026-03-01T10:00:00.1234560Z") == timestamp_identity(
        "2026-03-01T10:00:00.123456Z"
    )
