"""The parse result, the accumulator the format parsers fill, and the one way a fault becomes an error."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from actionspace._encoder import dump_within
from actionspace._fast import fast_init
from actionspace._placeholders import is_model
from actionspace.errors import ActionError
from actionspace.types import ToolCall

__all__ = [
    "READ_UNITS",
    "UNFINISHED_STOPS",
    "Collector",
    "Malformed",
    "ParseResult",
    "checked_ids",
    "dumped_event",
    "known_ids",
    "line_col",
    "parse_error",
]

_WEAK_FORMATS = frozenset({"text", "empty"})
UNFINISHED_STOPS: Final = frozenset(
    {"pause_turn", "max_tokens", "length", "max_output_tokens", "incomplete", "MAX_TOKENS"}
)
"""Stop reasons of an output the provider ended before the model finished it, which goes on when
sent back: Anthropic's ``pause_turn`` (a long server-tool turn paused) and ``max_tokens``, OpenAI
chat's ``length``, a Responses output ``incomplete`` for its ``max_output_tokens`` (or for no reason
given), Gemini's ``MAX_TOKENS``. A filter's or a refusal's stop, a full context window, a failed
response: asking again would not finish them."""
# Faults about the input as a whole rather than about one call: they carry no call index.
_WHOLE_INPUT_REASONS = frozenset(
    {
        "cut_off",
        "internal",
        "invalid_utf8",
        "missing_choices",
        "missing_message",
        "not_assistant",
        "too_deep",
        "too_large",
        "unrecognized_object",
        "unsupported_type",
        "unterminated_reasoning",
        "unterminated_section",
    }
)


@fast_init
@dataclass(frozen=True, kw_only=True)
class ParseResult:
    """What :func:`actionspace.parse.parse` read out of one model output."""

    calls: tuple[ToolCall, ...]
    """Well-formed calls in emitted order; when ``error`` is set, only those before the fault (none
    when the provider says the output was cut off: any of its calls may be incomplete)."""
    content: str | None
    """Plain assistant text with calls and reasoning removed, stripped; None when there is none."""
    reasoning: str | None
    """Text of reasoning / thinking blocks, stripped; None when there is none."""
    error: ActionError | None
    """A ``parse_error`` naming what was malformed and where; None when everything parsed."""
    format: str
    """The detected format, e.g. ``openai_chat``, ``anthropic``, ``hermes``, ``text``."""
    refusal: str | None = None
    """The model's refusal (OpenAI chat ``refusal``, a Responses ``refusal`` part), stripped; also
    in ``content``, where a caller that shows the text finds it. None when the model refused nothing."""
    stop_reason: str | None = None
    """Why the provider says the output ended, in its words: Anthropic ``stop_reason`` (``end_turn``,
    ``tool_use``, ``pause_turn``, ``max_tokens``…), OpenAI chat ``finish_reason`` (``stop``,
    ``tool_calls``, ``length``…), a Responses response's ``status`` (``completed``…), or for an
    ``incomplete`` one its ``incomplete_details.reason`` (``max_output_tokens``, ``content_filter``).
    None when the output does not say (a bare message, raw text, a list of items)."""

    @property
    def ok(self) -> bool:
        """True when nothing was malformed."""
        return self.error is None

    @property
    def unfinished(self) -> bool:
        """True when the provider ended the output before the model finished it (``stop_reason``
        ``pause_turn``, ``max_tokens``, ``length``, ``max_output_tokens``, ``incomplete``): its
        content is not the answer; sent back, the output goes on."""
        return self.stop_reason in UNFINISHED_STOPS

    def to_dict(self) -> dict[str, Any]:
        """Stable JSON shape, for traces (``refusal`` only when the model refused, ``stop_reason`` only
        when the provider gave one)."""
        out = {
            "calls": [c.to_dict() for c in self.calls],
            "content": self.content,
            "reasoning": self.reasoning,
            "error": self.error.to_dict() if self.error is not None else None,
            "format": self.format,
        }
        if self.refusal is not None:
            out["refusal"] = self.refusal
        if self.stop_reason is not None:
            out["stop_reason"] = self.stop_reason
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ParseResult:
        error = data.get("error")
        return cls(
            calls=tuple(ToolCall.from_dict(c) for c in data.get("calls", ())),
            content=data.get("content"),
            reasoning=data.get("reasoning"),
            error=ActionError.from_dict(error) if error else None,
            format=str(data.get("format", "unknown")),
            refusal=data.get("refusal"),
            stop_reason=data.get("stop_reason") if isinstance(data.get("stop_reason"), str) else None,
        )


def known_ids(result: ParseResult) -> tuple[str, ...]:
    """The call ids ``result`` still knows, each once: its calls', then the call's at its fault
    (``details["id"]``; one repeating an earlier id names that call's), then those of the calls a
    cut voided (``details["call_ids"]``)."""
    details = result.error.details if result.error is not None else {}
    found: list[object] = [c.id for c in result.calls]
    if details.get("reason") != "duplicate_call_id":
        found.append(details.get("id"))
    voided = details.get("call_ids")
    found.extend(voided if isinstance(voided, list | tuple) else ())
    return tuple(dict.fromkeys(i for i in found if isinstance(i, str) and i))


class Malformed(Exception):
    """Raised inside a format parser at the first fault; the caller turns it into a ``parse_error``.

    ``pos`` is a character offset into the text being parsed, or into ``source`` when that is given
    (a nested string such as an ``arguments`` value).
    """

    def __init__(
        self,
        reason: str,
        message: str,
        *,
        pos: int | None = None,
        source: str | None = None,
        fmt: str | None = None,
        **details: Any,
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.pos = pos
        self.source = source
        self.fmt = fmt
        self.details = details

    def at(self, pos: int) -> Malformed:
        """This fault, placed at ``pos`` when it carries no position of its own."""
        if self.pos is None and self.source is None:
            self.pos = pos
        return self


def line_col(text: str, pos: int) -> tuple[int, int]:
    """1-based line and column of character offset ``pos`` in ``text``."""
    pos = max(0, min(pos, len(text)))
    line = text.count("\n", 0, pos) + 1
    column = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return line, column


def parse_error(
    fmt: str,
    reason: str,
    message: str,
    *,
    pos: int | None = None,
    text: str | None = None,
    index: int | None = None,
    call_id: str | None = None,
    **extra: Any,
) -> ActionError:
    """A ``parse_error`` whose message and details say what was wrong and where."""
    details: dict[str, Any] = {"format": fmt, "reason": reason}
    where = ""
    if pos is not None:
        details["position"] = pos
        if text is not None:
            line, column = line_col(text, pos)
            details["line"] = line
            details["column"] = column
            where = f" at line {line}, column {column} (offset {pos})"
        else:
            where = f" at offset {pos}"
    subject = fmt
    if index is not None:
        details["index"] = index
        subject = f"{fmt} call {index}"
    if call_id is not None:
        details["id"] = call_id
        subject = f"{subject} (id {call_id!r})"
    details.update(extra)
    return ActionError.of("parse_error", f"{subject}: {message}{where}", details=details)


def checked_ids(result: ParseResult) -> ParseResult:
    """``result``, or a ``parse_error`` at its first call whose id is neither None nor a string
    (reason ``invalid_id``, as the parsers say of such an id: a ``ToolCall`` built with one) or
    repeats an earlier call's id (reason ``duplicate_call_id``; calls without an id never do).

    Providers refuse a message whose calls share an id, and one answer per id could not tell the
    model which call it answers: such a call is a fault like any other, so ``calls`` keeps only the
    calls before it (every call of ``result`` precedes any fault it already holds).
    """
    calls = result.calls
    seen: set[str] = set()
    for index, call in enumerate(calls):
        ident = call.id
        if type(call.name) is not str:  # a ToolCall built so: it names no function
            error = parse_error(
                result.format,
                "invalid_name",
                f"the tool name must be a string, got {type(call.name).__name__}",
                index=index,
            )
        elif ident is None or ident == "":
            continue
        elif type(ident) is not str:
            error = parse_error(
                result.format,
                "invalid_id",
                f"the call id must be a string, got {type(ident).__name__}",
                index=index,
            )
        elif ident not in seen:
            seen.add(ident)
            continue
        else:
            error = parse_error(
                result.format,
                "duplicate_call_id",
                "this call id is also the id of an earlier call of the message; none of its calls ran: "
                "re-emit the calls, each with an id of its own",
                index=index,
                call_id=ident if len(ident) <= _ID_SHOWN else ident[:_ID_SHOWN] + "…",
            )
            error = dataclasses.replace(error, recovery=(*error.recovery, "use_distinct_call_ids"))
        if result.format == "gemini":  # Gemini wants each call answered: name them all, in order
            from actionspace.parse._gemini import named_positions

            earlier = result.error.details if result.error is not None else None
            error = dataclasses.replace(error, details=named_positions(error.details, calls, earlier))
        return dataclasses.replace(result, calls=calls[:index], error=error)
    return result


_ID_SHOWN = 200
"""Characters of a repeated call id an error names (a hostile id may be any length)."""


READ_UNITS: Final = 1 << 20
"""Most parts of a provider object ``parse`` reads (see :meth:`Collector.spend`)."""


class Collector:
    """Accumulates calls, content and reasoning across one ``parse``; keeps only the first fault."""

    __slots__ = (
        "_properties",
        "calls",
        "content",
        "error",
        "format",
        "left",
        "reasoning",
        "recent",
        "refusal",
        "stop_reason",
        "tools",
    )

    def __init__(self, tools: object = None) -> None:
        self.calls: list[ToolCall] = []
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.refusal: list[str] = []
        self.error: ActionError | None = None
        self.format: str | None = None
        self.recent: str | None = None
        self.tools = tools
        self._properties: dict[str, Mapping[str, Any]] | None = None
        self.left = READ_UNITS
        self.stop_reason: str | None = None

    def stopped(self, reason: object) -> None:
        """The provider's stop reason for the output (the first one given; see ``ParseResult``)."""
        if self.stop_reason is None and isinstance(reason, str) and reason:
            self.stop_reason = str(reason)

    def spend(self, units: int, path: str) -> None:
        """Charge ``units`` of reading a provider object (an item each, a unit per 16 characters
        of text); past :data:`READ_UNITS` the object is refused (``too_large``), never read on: a list
        shared down forty levels is 2**40 items to read, and what its ``model_dump`` gives may be
        anything."""
        self.left -= units
        if self.left < 0:
            raise Malformed(
                "too_large",
                f"{path}: reading the output costs more than {READ_UNITS} parts, a part held in several"
                " places counted each time",
                path=path,
            )

    def note(self, fmt: str) -> None:
        """Record the detected format; the first specific one wins over ``text``/``empty``."""
        self.recent = fmt
        if self.format is None or (self.format in _WEAK_FORMATS and fmt not in _WEAK_FORMATS):
            self.format = fmt

    def add_call(self, call: ToolCall) -> None:
        self.calls.append(call)

    def add_content(self, text: object) -> None:
        if isinstance(text, str):
            text = text.strip()
            if text:
                self.content.append(text)

    def add_refusal(self, text: object) -> None:
        """A refusal is the model's text too: kept as content and apart."""
        if isinstance(text, str) and text.strip():
            self.refusal.append(text.strip())
            self.add_content(text)

    def add_reasoning(self, text: object) -> None:
        if isinstance(text, str):
            text = text.strip()
            if text:
                self.reasoning.append(text)

    def fail(self, fault: Malformed, fmt: str, *, text: str | None = None, pos: int | None = None) -> None:
        """Record ``fault`` (the first one only). ``pos``/``text`` locate it when it has no source."""
        if self.error is not None:
            return
        details = dict(fault.details)
        if fault.reason == "cut_off":  # a call that looks whole may have been cut: none is kept
            ids = [c.id for c in self.calls if type(c.id) is str and c.id]
            if ids:  # still owed an answer each
                details.setdefault("call_ids", list(dict.fromkeys(ids)))
            self.calls.clear()
        fmt = fault.fmt or fmt
        index = details.pop("index", None if fault.reason in _WHOLE_INPUT_REASONS else len(self.calls))
        call_id = details.pop("call_id", None)
        if fault.source is not None:
            pos, text = fault.pos, fault.source
        elif pos is None:
            pos = fault.pos
        self.error = parse_error(
            fmt, fault.reason, fault.message, pos=pos, text=text, index=index, call_id=call_id, **details
        )
        self.note(fmt)

    def offers(self, name: str) -> bool:
        """Whether ``tools`` offers a tool named exactly ``name``."""
        self.properties(name)
        assert self._properties is not None
        return name in self._properties

    def properties(self, name: str) -> Mapping[str, Any]:
        """JSON Schema ``properties`` of tool ``name`` from ``tools``; empty when unknown."""
        if self._properties is None:
            from actionspace.parse._schema import index_tools

            self._properties = index_tools(self.tools)
        found = self._properties.get(name)
        if found is None and "@" in name:
            found = self._properties.get(name.partition("@")[0])
        return found if found is not None else {}

    def result(self) -> ParseResult:
        return checked_ids(self._result())

    def _result(self) -> ParseResult:
        return ParseResult(
            calls=tuple(self.calls),
            content="\n".join(self.content) if self.content else None,
            reasoning="\n".join(self.reasoning) if self.reasoning else None,
            error=self.error,
            format=self.format or "empty",
            refusal="\n".join(self.refusal) if self.refusal else None,
            stop_reason=self.stop_reason,
        )


def dumped_event(item: object) -> Mapping[str, Any] | None:
    """An SDK object's ``model_dump()`` when it is a mapping; None for anything else, for a dump
    past :data:`READ_UNITS` (it would not end) and for a dump that raises (a foreign failure)."""
    dump = getattr(item, "model_dump", None)
    if not callable(dump) or (is_model(item) and not dump_within(item, READ_UNITS)):
        return None
    try:
        value = dump()
    except Exception:
        return None
    return value if isinstance(value, Mapping) else None
