"""Google Gemini (the Gemini API's ``generateContent`` / ``streamGenerateContent``, Vertex AI, the
google-genai SDK): the model's calls are ``functionCall`` parts of its ``Content``.

::

    {"candidates": [{"content": {"role": "model", "parts": [
        {"text": "Checking both cities."},
        {"functionCall": {"id": "a1", "name": "get_weather", "args": {"city": "Paris"}}},
        {"functionCall": {"id": "a2", "name": "get_weather", "args": {"city": "Rome"}}}]},
      "finishReason": "STOP"}]}

Read: a ``GenerateContentResponse`` (its first candidate, as a completion is read as its first
choice), a ``Candidate``, a ``Content`` (``role`` ``model``, or none), a list of parts or one part;
REST JSON (camelCase) or the SDK's objects (their ``model_dump()``: snake_case, unset fields
``None``). Each ``functionCall`` part is one call, in part order (several: parallel function
calling): ``name``, ``args`` as the arguments (missing: ``{}``; not an object: kept, and refused
at validation as ``invalid_arguments``), ``id`` when the API gave one (else none: a session gives
it one, as for every format without ids). ``text`` parts are the content (read as raw model text
when the message holds no ``functionCall``, as a chat message's content is); ``thought`` parts the
reasoning; other parts (inline data, code the server ran, a server tool's call) hold no call of
the client's. ``finishReason`` is the ``stop_reason``: ``MAX_TOKENS`` or a filter's stop
(``SAFETY``, ``RECITATION``…) over calls is ``cut_off`` (none runs); ``MALFORMED_FUNCTION_CALL``,
``UNEXPECTED_TOOL_CALL``, ``TOO_MANY_TOOL_CALLS`` are a ``parse_error`` of that reason (lower case)
carrying the ``finishMessage``. A prompt the API blocked (no candidates) proposes nothing; its
``blockReason`` is the ``stop_reason``.

Streamed, each chunk is a ``GenerateContentResponse`` whose parts each carry a whole
``functionCall`` (:func:`stream_chunk`, fed by :class:`~actionspace.parse.StreamParser`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from actionspace._placeholders import bounded_repr
from actionspace.parse._gemini_shapes import field, gemini_parts, is_chunk, word
from actionspace.parse._result import Collector, Malformed, dumped_event
from actionspace.parse._structured import _call, cut_off_fault
from actionspace.types import ToolCall

if TYPE_CHECKING:
    from actionspace.parse._stream import StreamParser

__all__ = [
    "CUT_REASONS",
    "FAILED_REASONS",
    "name_calls",
    "name_listed",
    "named_positions",
    "read_gemini",
    "stream_chunk",
]

CUT_REASONS: Final = frozenset(
    {
        "MAX_TOKENS",
        "SAFETY",
        "RECITATION",
        "LANGUAGE",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
        "MODEL_ARMOR",
    }
)
"""``finishReason`` values of an output stopped before its end: by the token limit, or by a filter."""
FAILED_REASONS: Final = frozenset(
    {"MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS", "MALFORMED_RESPONSE"}
)
"""``finishReason`` values saying the model's call could not be read or was not allowed."""
FORMAT: Final = "gemini"
NAMES: Final = "function_names"
"""The key of a Gemini ``parse_error``'s details holding call id → function name."""
POSITIONS: Final = "function_calls"
"""The key of a Gemini ``parse_error``'s details holding the name of each call, in order."""
IDS: Final = "function_call_ids"
"""The key of a Gemini ``parse_error``'s details holding the id of each call (None when it has
none), in order: Gemini wants every call of the turn answered, under its id or by its position."""
MAX_NAMED: Final = 512
_LIST_DEPTH: Final = 8
"""How deep lists within a list are read for the calls they name (parse reads deeper ones too)."""


def read_gemini(value: Mapping[Any, Any], coll: Collector, path: str) -> None:
    """Add what a Gemini mapping holds to ``coll``; raises :class:`Malformed` at the first fault."""
    coll.note(FORMAT)
    try:
        if is_chunk(value):
            _response(value, coll, path)
        elif isinstance(value.get("parts"), list | tuple):
            _content(value, coll, path)
        elif isinstance(value.get("content"), Mapping):
            _candidate(value, coll, path)
        else:
            _parts([value], coll, path, lone=True)
    except Malformed as fault:
        named = _Named()
        named.add_message(value)
        named.describe(fault.details)
        raise


class _Named:
    """The calls of a Gemini message, in part order, as a ``functionResponse`` answering one that
    did not run names it: each call's function name (``""`` when not text) and id (None when it
    has none, or none as text), and call id → name for the first call holding each id."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.order: list[str] = []
        self.ids: list[str | None] = []

    def add(self, ident: object, name: object) -> None:
        """Add the call of ``ident`` (its id as the model gave it) and ``name`` (its function's)."""
        if len(self.order) >= MAX_NAMED:
            return
        self.order.append(name if type(name) is str else "")
        self.ids.append(ident if type(ident) is str and ident else None)
        if type(ident) is str and type(name) is str and ident not in self.names:
            self.names[ident] = name

    def add_message(self, value: Mapping[Any, Any]) -> None:
        """Add each ``functionCall`` part of the model's message in ``value``."""
        for part in (gemini_parts(value) or ())[: max(0, MAX_NAMED - len(self.order))]:
            call = field(part, "functionCall", "function_call") if isinstance(part, Mapping) else None
            if call is not None:
                self.add(*((call.get("id"), call.get("name")) if isinstance(call, Mapping) else (None, None)))

    def add_listed(self, value: object, depth: int = 0) -> None:
        """Add the calls of each item of a list (parts, contents, responses, their SDK objects), in
        order, as :func:`~actionspace.parse.parse` reads such a list."""
        if len(self.order) >= MAX_NAMED or depth > _LIST_DEPTH:
            return
        if not isinstance(value, Mapping | list | tuple):
            value = dumped_event(value)
        if isinstance(value, Mapping):
            self.add_message(value)
        elif isinstance(value, list | tuple):
            for item in value[:MAX_NAMED]:
                self.add_listed(item, depth + 1)

    def describe(self, details: dict[str, Any]) -> None:
        """Name the calls in a ``parse_error``'s ``details``: the three keys above."""
        details.setdefault(NAMES, self.names)
        details.setdefault(POSITIONS, self.order)
        details.setdefault(IDS, self.ids)


def name_calls(fault: Malformed, events: Sequence[Mapping[Any, Any]]) -> Malformed:
    """``fault`` (a stream's), its details naming the calls of the Gemini chunks among ``events``
    as :func:`read_gemini` names a whole response's (:data:`NAMES`, :data:`POSITIONS`, :data:`IDS`)."""
    named = _Named()
    for event in events:
        if is_chunk(event):
            named.add_message(event)
    if named.order:
        named.describe(fault.details)
    return fault


def name_listed(fault: Malformed, value: list[Any] | tuple[Any, ...]) -> None:
    """Name in ``fault`` (a Gemini item's of the list ``value``) the calls of every item of the
    list, not of the faulty one alone: each is answered, in its position."""
    named = _Named()
    named.add_listed(value)
    for key in (NAMES, POSITIONS, IDS):
        fault.details.pop(key, None)
    named.describe(fault.details)


def named_positions(
    details: Mapping[str, Any], calls: Sequence[ToolCall], earlier: Mapping[str, Any] | None
) -> dict[str, Any]:
    """``details`` of a Gemini message's ``parse_error`` found once its calls were read (two calls
    under one id), naming the calls as :func:`read_gemini` names those of a message that did not
    read: each call is answered, in its position, under the function the model called. The calls
    are those an ``earlier`` fault's details name (it stopped the reading: they name every call of
    the message), else ``calls``."""
    out = dict(details)
    if earlier is not None and POSITIONS in earlier:
        out.update({key: earlier[key] for key in (NAMES, POSITIONS, IDS) if key in earlier})
        return out
    named = _Named()
    for call in calls:
        named.add(call.id, call.name)
    named.describe(out)
    return out


def _response(value: Mapping[Any, Any], coll: Collector, path: str) -> None:
    candidates = value.get("candidates")
    if not candidates:  # a prompt the API blocked: no candidate, the reason in promptFeedback
        feedback = field(value, "promptFeedback", "prompt_feedback")
        if isinstance(feedback, Mapping):
            coll.stopped(word(field(feedback, "blockReason", "block_reason")))
        return
    first = candidates[0]
    if not isinstance(first, Mapping):
        where = f"{path}.candidates[0]"
        raise Malformed(
            "invalid_candidate", f"{where} is a {type(first).__name__}, not an object", path=where
        )
    _candidate(first, coll, f"{path}.candidates[0]")


def _candidate(value: Mapping[Any, Any], coll: Collector, path: str) -> None:
    reason = word(field(value, "finishReason", "finish_reason"))
    coll.stopped(reason)  # before the content: a call cut off in it still says why it stopped
    start = len(coll.calls)
    content = value.get("content")
    try:
        if isinstance(content, Mapping):
            _content(content, coll, f"{path}.content")
        elif content is not None:
            where = f"{path}.content"
            raise Malformed("invalid_content", f"{where} is a {type(content).__name__}", path=where)
    except Malformed:
        if reason not in CUT_REASONS:
            raise
        start = -1  # a fault in a cut output: the cut says more than where it stops
    where = f"{path}.finishReason"
    if reason in FAILED_REASONS:
        said = field(value, "finishMessage", "finish_message")
        told = f": {bounded_repr(said, 300)}" if isinstance(said, str) and said else ""
        raise Malformed(
            reason.lower(), f"the provider ended the output with finishReason {reason!r}{told}", path=where
        )
    if reason in CUT_REASONS and len(coll.calls) > start:
        raise cut_off_fault(f"finishReason {reason!r}", where)


def _content(value: Mapping[Any, Any], coll: Collector, path: str) -> None:
    role = value.get("role")
    if role is not None and (type(role) is not str or role not in ("model", "assistant")):
        raise Malformed(
            "not_assistant", f"{path} is a {bounded_repr(role, 80)} content, not the model's", path=path
        )
    parts = value.get("parts")
    if parts is None:
        return
    if not isinstance(parts, list | tuple):
        raise Malformed("invalid_parts", f"{path}.parts is a {type(parts).__name__}, not a list", path=path)
    _parts(parts, coll, f"{path}.parts")


def _parts(parts: list[Any] | tuple[Any, ...], coll: Collector, path: str, *, lone: bool = False) -> None:
    coll.spend(1 + len(parts), path)
    text: list[str] = []
    calls = 0
    for i, part in enumerate(parts):
        where = path if lone else f"{path}[{i}]"
        if not isinstance(part, Mapping):
            raise Malformed("invalid_part", f"{where} is a {type(part).__name__}, not a part", path=where)
        call = field(part, "functionCall", "function_call")
        if call is not None:
            calls += 1
            coll.add_call(function_call(call, f"{where}.functionCall"))
        elif part.get("thought") is True:
            coll.add_reasoning(part.get("text"))
        elif isinstance(part.get("text"), str):
            text.append(part["text"])
    if calls or not text:
        for piece in text:
            coll.add_content(piece)
        return
    from actionspace.parse._text import parse_text_or_bytes

    parse_text_or_bytes("".join(text), coll, strict=False, path=path)  # no call: raw model text?
    coll.note(FORMAT)


def function_call(value: object, path: str) -> ToolCall:
    """A ``functionCall`` (``{"id"?, "name", "args"?}``) as one call."""
    if not isinstance(value, Mapping):
        raise Malformed(
            "invalid_function_call", f"{path} is a {type(value).__name__}, not an object", path=path
        )
    if field(value, "partialArgs", "partial_args") is not None or value.get("willContinue") is True:
        raise Malformed(
            "partial_arguments",
            f"{path} streams its arguments in pieces (partialArgs), which are not read: ask for whole calls",
            path=path,
        )
    return _call(value.get("name"), field(value, "args"), value.get("id"), path, args_key="args")


def stream_chunk(parser: StreamParser, chunk: Mapping[str, Any]) -> None:
    """Feed one streamed ``GenerateContentResponse`` to ``parser``: text and thought parts as they
    come, each ``functionCall`` part as a whole call (complete at once, unless a later chunk
    says the output was cut off), the ``finishReason`` as the stream's finish signal."""
    candidates = chunk.get("candidates")
    if not candidates:
        feedback = field(chunk, "promptFeedback", "prompt_feedback")
        if isinstance(feedback, Mapping) and field(feedback, "blockReason", "block_reason") is not None:
            parser._ended = True
            parser._stopped(word(field(feedback, "blockReason", "block_reason")))
        return
    candidate = candidates[0]
    if not isinstance(candidate, Mapping):
        return
    content = candidate.get("content")
    parts = content.get("parts") if isinstance(content, Mapping) else None
    for part in parts if isinstance(parts, list | tuple) else ():
        if not isinstance(part, Mapping):
            continue
        call = field(part, "functionCall", "function_call")
        if call is not None:
            try:
                read = function_call(call, f"$.{FORMAT}[{len(parser._slots.order)}]")
            except Malformed as fault:
                parser._invalid = parser._invalid or fault
                continue
            slot = parser._slots.slot(FORMAT, len(parser._slots.order))
            slot.name, slot.call_id, slot.whole, slot.given = read.name, read.id, read.arguments, True
            slot.done = parser._cut is None
        elif part.get("thought") is True and isinstance(part.get("text"), str):
            parser._reasoning.append(part["text"])
        else:
            parser._add_text(part.get("text"))
    _finish(parser, candidate)


def _finish(parser: StreamParser, candidate: Mapping[Any, Any]) -> None:
    reason = word(field(candidate, "finishReason", "finish_reason"))
    if reason is None:
        return
    parser._ended = True
    parser._stopped(reason)
    where = "$.candidates[0].finishReason"
    if reason in FAILED_REASONS:
        said = field(candidate, "finishMessage", "finish_message")
        told = f": {bounded_repr(said, 300)}" if isinstance(said, str) and said else ""
        message = f"the provider ended the output with finishReason {reason!r}{told}"
        parser._invalid = parser._invalid or Malformed(reason.lower(), message, path=where)
    elif reason in CUT_REASONS:
        parser._cut_off(f"finishReason {reason!r}", where)
