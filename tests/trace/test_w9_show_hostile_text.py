"""What ``actionspace trace show`` prints of a tool's text cannot forge what the terminal shows:
bidirectional overrides, invisible format characters, C1 controls and unpaired surrogates are
shown as escapes, in the table and in ``--json`` (whose escapes read back as the same text)."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from rich.console import Console
from typer.testing import CliRunner

from actionspace.trace.cli import trace_app
from actionspace.trace.events import RunSummary, TraceEvent
from actionspace.trace.render import events_json, run_header, runs_table, timeline_table
from actionspace.trace.sqlite import SqliteTraceStore

_HIDDEN = [
    "\u202e",  # RIGHT-TO-LEFT OVERRIDE: the rest of the line reads backwards
    "\u2066",  # LEFT-TO-RIGHT ISOLATE
    "\u2069",  # POP DIRECTIONAL ISOLATE
    "\u200f",  # RIGHT-TO-LEFT MARK
    "\u061c",  # ARABIC LETTER MARK
    "\u200b",  # ZERO WIDTH SPACE
    "\ufeff",  # ZERO WIDTH NO-BREAK SPACE
    "\U000e0041",  # TAG LATIN CAPITAL LETTER A (invisible)
    "\x9b",  # C1 CONTROL SEQUENCE INTRODUCER
    "\x85",  # NEXT LINE
    "\x7f",
    "\u2028",
]


_ACTED_ON = {"Cc", "Cf", "Cs", "Zl", "Zp"}
"""Controls, format characters, surrogates, line and paragraph separators."""


def _ev(seq: int, kind: str, call_id: str | None = None, /, **data: object) -> TraceEvent:
    return TraceEvent(run_id="r", seq=seq, kind=kind, ts=1.0 + seq, call_id=call_id, data=data)


def _printed(renderable: object) -> str:
    console = Console(width=200, record=True, force_terminal=False)
    with console.capture() as captured:
        console.print(renderable)
    return captured.get()


@pytest.mark.parametrize("hidden", _HIDDEN, ids=[f"U+{ord(ch):04X}" for ch in _HIDDEN])
def test_the_timeline_shows_format_and_control_characters_as_escapes(hidden: str) -> None:
    evil = f"ok{hidden}kO"
    shown = _printed(
        timeline_table(
            [
                _ev(0, "validated", evil, tool=evil, verdict="ok"),
                _ev(1, "observation", "c", status="ok", category=evil, recovery=[evil]),
                _ev(2, evil, "c", result=evil, other={"k": evil}),
                _ev(3, "model_output", raw=evil),
            ]
        )
    )
    assert hidden not in shown
    escape = f"\\x{ord(hidden):02x}" if ord(hidden) < 0x100 else f"\\u{ord(hidden):04x}"
    if not hidden.isspace():  # a line break or separator of a summary is read as a space
        assert escape in shown or f"\\U{ord(hidden):08x}" in shown


def test_a_run_id_with_a_bidi_override_is_escaped_in_the_listing_and_the_header() -> None:
    summary = RunSummary(
        run_id="run\u202eexe.txt", started_at=1.0, last_at=2.0, events=1, calls=0, errors=0, finished=True
    )
    for renderable in (runs_table([summary]), run_header(summary)):
        shown = _printed(renderable)
        assert "\u202e" not in shown and "run\\u202eexe.txt" in shown


@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(codec=None, exclude_categories=()), max_size=12))
@example("seq")  # a data key named like a parameter of ``_ev``
@example("call_id")
@example("status")  # a data key the event holds already: the text's own value replaces it
def test_events_json_is_utf8_text_without_hidden_characters_and_reads_back_the_same(text: str) -> None:
    events = [_ev(0, "observation", text, **({"status": "ok", "content": text} | {text: [text]}))]
    printed = events_json(events)
    printed.encode("utf-8")  # no unpaired surrogate: a UTF-8 terminal can be written to
    for ch in printed:
        assert ch == "\n" or unicodedata.category(ch) not in _ACTED_ON, repr(ch)
    assert json.loads(printed) == [e.to_dict() for e in events]


def test_trace_show_json_prints_a_stored_unpaired_surrogate_as_its_escape(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with SqliteTraceStore(path) as store:
        store.append_many([_ev(0, "observation", "c", status="ok", content="half \ud83d emoji \u202e\x9b")])
    result = CliRunner().invoke(trace_app, ["show", "r", "--json", "--store", f"sqlite:///{path}"])
    assert result.exit_code == 0, (result.output, result.exception)
    assert "\\ud83d" in result.stdout and "\\u202e" in result.stdout and "\\u009b" in result.stdout
    [event] = json.loads(result.stdout)
    assert event["data"]["content"] == "half \ud83d emoji \u202e\x9b"
