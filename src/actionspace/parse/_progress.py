"""What a stream shows before it ends: the calls complete so far, and each structured call still
being assembled from provider events, shown provisionally."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from actionspace.parse._result import Malformed
from actionspace.parse._scan import decode_arguments
from actionspace.types import ToolCall

__all__ = [
    "CLOSING_CHARS",
    "EAGER_LIMIT",
    "SEALS",
    "Pending",
    "StreamProgress",
    "event_call",
    "mend",
    "sealed",
    "start_input",
]

EAGER_LIMIT = 8192
"""Characters up to which a stream re-reads its text (or shows a call's arguments) at every delta."""

CLOSING_CHARS = frozenset(">}])|｜")
"""A delta of raw text without any of these characters cannot complete a call in any text format."""
SEALS = (
    "<tool_call|>",
    "</tool_call>",
    "</function>",
    "<|call|>",
    "<|end|>",
    "<|return|>",
    "<|tool_call_end|>",
    "<|tool_calls_section_end|>",
    "<|tool_call_section_end|>",
    "<｜tool▁call▁end｜>",
    "<｜tool▁calls▁end｜>",
    "</｜DSML｜invoke>",
    "</｜DSML｜function_calls>",
    "</｜DSML｜tool_calls>",
    "</|DSML|invoke>",
    "<|python_end|>",
    "<end_function_call>",
    "<|im_end|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|eot|>",
    "<｜end▁of▁sentence｜>",
    "<turn|>",
    "<|tool_response>",
    "</s>",
    "</seed:tool_call>",
    "</minimax:tool_call>",
    "</invoke>",
    "</tool_calls>",
    "<|action_end|>",
    "<seed:eos>",
)
"""Tokens that end a call (or the output) in some text format: raw text ending so is read at once."""


@dataclass(frozen=True, kw_only=True)
class StreamProgress:
    """What has arrived so far, for showing progress before the output ends."""

    calls: tuple[ToolCall, ...]
    """Calls reported complete, in order."""
    provisional: tuple[ToolCall, ...]
    """Calls read so far that may still change or vanish (shown as pending, never executed). For
    provider events, a call's arguments are the text received so far, up to 8 KB; past that they
    are brought up to date each time they grew by an eighth (a prefix of what arrived, at least
    seven eighths of it), so that a console showing progress after every delta does work in
    proportion to the call, not to its square."""
    chars: int
    """Characters of raw text (or of arguments, for provider events) received."""


def mend(pieces: list[str], piece: str) -> str:
    """``piece``, to append to ``pieces``, with a surrogate pair split between the last piece and it
    joined into its one character (in the last piece): a server that cuts deltas by UTF-16 units
    sends each half as an escape of its own, and two lone halves are no text a call may carry."""
    if piece and pieces and "\udc00" <= piece[0] <= "\udfff":
        last = pieces[-1]
        if last and "\ud800" <= last[-1] <= "\udbff":
            pieces[-1] = last[:-1] + chr(0x10000 + ((ord(last[-1]) - 0xD800) << 10) + ord(piece[0]) - 0xDC00)
            return piece[1:]
    return piece


@dataclass
class Pending:
    """One structured call being assembled from provider events."""

    name: str = ""
    call_id: str | None = None
    arguments: list[str] = field(default_factory=list)
    chars: int = 0
    whole: Any = None
    start: str | None = None
    """The input an Anthropic ``content_block_start`` carried, as JSON: the call's input when no
    ``input_json_delta`` text follows (deltas that carry any replace it, as Anthropic's SDK reads them)."""
    done: bool = False
    free_text: bool = False
    """A custom (free-form) tool's call: its input is the text itself, not JSON to decode."""
    given: bool = False
    """A call an event carried whole (a Gemini ``functionCall``): ``whole`` is its arguments' value."""
    shown: ToolCall | None = None
    """The provisional call last shown, and how many characters of arguments it holds."""
    shown_chars: int = -1

    def add(self, piece: str) -> int:
        """Append a piece of the arguments (a pair split from the last piece mended); its length."""
        piece = mend(self.arguments, piece)
        self.arguments.append(piece)
        self.chars += len(piece)
        return len(piece)

    def add_name(self, piece: str) -> None:
        """Append a piece of the tool name. A name comes before its arguments: once they began,
        the whole name sent again is a repeat (TGI repeats it on every chunk of a call), not more
        of it."""
        if not (self.arguments and piece == self.name):
            self.name += piece

    def provisional(self) -> ToolCall:
        """The call as received so far: every delta up to ``EAGER_LIMIT`` characters, then
        anew each time it grew by an eighth (the pieces joined into one as they are)."""
        shown = self.shown
        grown = self.chars - self.shown_chars
        if (
            shown is None
            or shown.name != self.name
            or (grown and (self.chars <= EAGER_LIMIT or grown * 8 >= self.shown_chars))
        ):
            text = "".join(self.arguments)
            self.arguments[:] = [text]
            shown = self.shown = ToolCall(name=self.name, arguments=text or self.start or "")
            self.shown_chars = self.chars
        return shown


def sealed(chunks: list[str]) -> bool:
    """Whether the raw text in ``chunks`` ends with a token that closes a call (read from its last
    64 characters, however many chunks hold them)."""
    pieces: list[str] = []
    size = 0
    for chunk in reversed(chunks):
        pieces.append(chunk[-64:])
        size += len(pieces[-1])
        if size >= 64:
            break
    return "".join(reversed(pieces)).rstrip().endswith(SEALS)


def start_input(value: object) -> str | None:
    """The input a ``tool_use`` block's ``content_block_start`` carried, as JSON text to decode as
    the deltas' text is: None when it is absent or empty (``{}``, what Anthropic sends before its
    deltas). A value JSON cannot write (a hostile event) is kept as text that fails to decode."""
    if value is None or (isinstance(value, Mapping) and not value):
        return None
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=True)
    except (TypeError, ValueError, RecursionError):
        return f"<{type(value).__name__} that is no JSON>"


def event_call(pending: Pending, path: str) -> ToolCall:
    """The call ``pending`` assembled, its arguments decoded; raises :class:`Malformed` for a call
    without a name or with arguments that are no JSON."""
    if not pending.name.strip():
        raise Malformed("missing_name", f"{path} has no tool name", path=path)
    given = pending.given or isinstance(pending.whole, str)
    raw = pending.whole if given else "".join(pending.arguments)
    if pending.start is not None and not raw:  # no delta followed the input the block began with
        raw = pending.start
    arguments = raw if pending.free_text else decode_arguments(raw, path=f"{path}.arguments")
    return ToolCall(name=pending.name.strip(), arguments=arguments, id=pending.call_id)
