"""Rules given hostile text: terminal escape sequences, control bytes, invalid UTF-8, huge lines."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace._canonical import dumps_plain
from actionspace.observation import MemoryArtifactStore, shape

ESCAPES = [
    "\x1b[31mred\x1b[0m",  # colour (CSI)
    "\x1b]0;pwned title\x07",  # window title (OSC ended by BEL)
    "\x1b]8;;https://evil.example/\x1b\\link\x1b]8;;\x1b\\",  # hyperlink (OSC ended by ST)
    "\x1b[?1049h",  # alternate screen
    "\x1b[2J\x1b[H",  # clear screen, cursor home
    "\x1bc",  # full reset (two-byte escape)
    "\x1b(0",  # character set switch
    "\x1bP1$r0m\x1b\\",  # device control string
]


def _log(text: str, max_bytes: int = 4096) -> str:
    shaped = shape(text, rule="log-v1", max_bytes=max_bytes, artifacts=MemoryArtifactStore())
    return dumps_plain(shaped.data)


def test_the_log_rule_shows_no_escape_sequence_to_the_model() -> None:
    text = (
        "\n".join(f"step {i}: {seq} done" for i, seq in enumerate(ESCAPES))
        + "\nERROR: failed \x1b[1mhard\x1b[0m\n"
    )
    out = _log(text)
    assert "\x1b" not in json.loads(out).__repr__() and "\\u001b" not in out
    assert "pwned" not in out and "evil.example" not in out  # the payload of a control string is not text
    assert "step 5:  done" in out and "ERROR: failed hard" in out


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([*ESCAPES, "text", "ERROR x", "\n", "\x1b", "\x1b[", "\x1b]"]), max_size=40))
def test_the_log_rule_is_bounded_and_deterministic_on_escape_soup(parts: list[str]) -> None:
    text = "".join(parts)
    first, second = _log(text, 600), _log(text, 600)
    assert first == second and len(first.encode("utf-8", "surrogatepass")) <= 600
