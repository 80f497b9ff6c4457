"""A streamed output handed over whole: the list of its provider events, read as the stream.

An application that streamed a model's output may pass the events it received (OpenAI chat
chunks, Responses stream events, Anthropic message stream events, Gemini's streamed
``GenerateContentResponse`` chunks; dicts or SDK objects) instead
of assembling the message itself: :func:`actionspace.parse.parse` reads them through
:class:`~actionspace.parse.StreamParser` (a stream cut off by the token limit included), and
:func:`actionspace.parse.call_ids` finds the call ids they hold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from actionspace.parse._gemini_shapes import is_chunk
from actionspace.parse._result import dumped_event
from actionspace.parse._stream import StreamParser

__all__ = ["event_stream"]

_ANTHROPIC_EVENTS = frozenset(
    {
        "message_start",
        "message_delta",
        "message_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "ping",
    }
)


def event_stream(raw: object, tools: Sequence[Mapping[str, Any]] | None = None) -> StreamParser | None:
    """A parser fed every event of ``raw`` when ``raw`` is a non-empty list or tuple of provider
    stream events only; None for anything else (nothing fed). Raises nothing of its own."""
    if not isinstance(raw, list | tuple) or not raw:
        return None
    events: list[Mapping[str, Any]] = []
    for item in raw:
        event = item if isinstance(item, Mapping) else dumped_event(item)
        if event is None or not _is_event(event):
            return None
        events.append(event)
    parser = StreamParser(tools)
    for event in events:
        parser.feed(event)
    return parser


def _is_event(value: Mapping[str, Any]) -> bool:
    kind = value.get("type")
    if isinstance(kind, str):
        return kind.startswith("response.") or kind in _ANTHROPIC_EVENTS
    if value.get("object") == "chat.completion.chunk":
        return True
    choices = value.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        return is_chunk(value)  # a Gemini stream's chunk: a whole GenerateContentResponse
    return "delta" in choices[0] and "message" not in choices[0]
