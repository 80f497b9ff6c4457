"""``trace replay``'s text is one line per decision whatever the trace holds: a tool name, call
id or recorded verdict holding line breaks or terminal escapes (a model's call id, an imported
trace) is shown escaped, never written to the terminal as it is."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from actionspace.trace.replay import Decision, Replayed, render_text

HOSTILE = "a\x1b[2J\x1b]0;owned\x07\nforged line\r\x9b31m"


def test_a_decision_holding_escapes_and_line_breaks_is_one_escaped_line() -> None:
    decision = Decision(
        call_id=HOSTILE, tool=HOSTILE, stage="validate", recorded=HOSTILE, replayed=HOSTILE, seq=3
    )
    text = render_text(Replayed(run_id="r", decisions=(decision,), problems=(HOSTILE,)))
    lines = text.split("\n")
    assert len(lines) == 3  # the problem, the decision, the counts
    assert not any(c in text for c in "\x1b\x07\r\x9b")
    assert "\\x1b" in lines[1]


@given(st.text(max_size=40), st.text(max_size=40), st.text(max_size=40))
def test_any_recorded_text_renders_one_line_per_decision(call_id: str, tool: str, recorded: str) -> None:
    decision = Decision(call_id=call_id, tool=tool, stage="authorize", recorded=recorded, replayed=recorded)
    text = render_text(Replayed(run_id="r", decisions=(decision, decision)))
    assert len(text.split("\n")) == 3
    assert all(ord(c) >= 0x20 and not 0x7F <= ord(c) <= 0x9F for c in text if c != "\n")
