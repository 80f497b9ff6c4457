"""Text a terminal is sent by ``actionspace trace``: what a tool, a model or an edited store wrote,
shown so that it cannot act on the terminal nor hide or reorder what a line says.

:data:`HIDDEN` is what a terminal acts on or does not show: C0 and C1 controls, line and paragraph
separators, unpaired surrogates (no UTF-8 stream takes them) and format characters (bidirectional
overrides and isolates, zero-width characters, tags: :data:`~actionspace._unicode.INVISIBLE`).
:func:`shown` writes each as a Python-style escape (``\\x1b``, ``\\u202e``, ``\\U000e0041``);
:func:`escaped_json` writes each as the JSON escape that reads back as the same character.
"""

from __future__ import annotations

import re
from typing import Final

from actionspace._unicode import INVISIBLE

__all__ = ["HIDDEN", "escaped_json", "shown"]

_NOT_C0: Final = r"[\x7f-\x9f\u2028\u2029\ud800-\udfff]|" + INVISIBLE.pattern
HIDDEN: Final = re.compile(r"[\x00-\x1f]|" + _NOT_C0)
"""The characters :func:`shown` escapes (see the module docstring)."""
_IN_JSON: Final = re.compile(_NOT_C0)
"""The same, as JSON text holds them (``json.dumps`` escapes the C0 controls itself)."""


def shown(text: str) -> str:
    """``text`` with every character of :data:`HIDDEN` written as its escape."""
    return HIDDEN.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def escaped_json(text: str) -> str:
    """JSON ``text`` with each character of :data:`HIDDEN` but the C0 controls as its ``\\uXXXX``
    escape (a pair of them past U+FFFF): such characters occur only inside strings, where the
    escape reads back as the character. ``json.dumps`` escaped the C0 controls already."""
    return text if text.isascii() and "\x7f" not in text else _IN_JSON.sub(_json_escape, text)


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
