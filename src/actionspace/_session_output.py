"""What a session reads from a model output before the engine runs it: its parse, and whether it
proposes more calls than one message may (:data:`MAX_CALLS_PER_MESSAGE`); and the copy of a
rendered tool a session hands out (:func:`fresh_tool`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Final

from actionspace.errors import ActionError, ConfigurationError
from actionspace.parse import ParseResult, StreamParser, call_ids, parse
from actionspace.types import Observation

MAX_CALLS_PER_MESSAGE: Final = 512
"""Default of :attr:`Session.max_calls <actionspace.session.Session.max_calls>`: the most calls
one model message may propose; a message over it runs none of them. Providers send a few dozen at
most; the bound keeps a message of many thousands from running them all."""


def checked_bound(value: object) -> int:
    """``value`` as :attr:`Session.max_calls <actionspace.session.Session.max_calls>`: a whole number
    of at least 1 (a bool is no count); raises ConfigurationError otherwise. 0 would refuse every
    call of every message, and a bound that is not a number would fail each message later."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigurationError(
            f"Session.max_calls must be a whole number of at least 1, got {value!r:.100}"
        )
    return int(value)


def handed(output: Any) -> tuple[Any, ParseResult | None]:
    """The output as the engine reads it, and its parse when it may hold a plain answer: a
    ``StreamParser`` is its whole output; a ``ParseResult`` its own parse (recorded as its ``to_dict()``)."""
    if isinstance(output, StreamParser):
        output = output.output()
    elif isinstance(output, ParseResult):
        return output.to_dict(), output
    return output, parsed(output)


def parsed(raw: Any) -> ParseResult | None:
    """``parse(raw)`` for output that may hold a plain answer or a refusal (text, a provider dict
    or list, an SDK object); None for a ``ToolCall`` or any other object (calls, never an answer)."""
    if isinstance(raw, str | dict | list) or callable(getattr(raw, "model_dump", None)):
        return parse(raw)
    return None


def too_many(result: ParseResult, bound: int, run_id: str) -> list[Observation] | ParseResult | None:
    """None when ``result`` proposes at most ``bound`` calls; else one ``budget_exceeded``
    observation per call (none ran), each answering the call's own id. A ``result`` that is also
    malformed comes back with its ``parse_error`` saying the bound too (:func:`_also_over`): the
    engine answers every call id the message holds with it, as it answers any malformed message."""
    count = len(result.calls)
    if count <= bound:
        return None
    if result.error is not None:
        return _also_over(result, bound)
    error = ActionError.of(
        "budget_exceeded",
        f"this message proposes {count} calls and at most {bound} run from one message; none of "
        "them ran: send the calls again, fewer in each message",
        recovery=("send_fewer_calls",),
        details={"calls": count, "max_calls_per_message": bound},
    )
    return [
        Observation(
            call_id=call.id if type(call.id) is str and call.id else f"{run_id}:{index}",
            tool=call.name if type(call.name) is str else "",
            status="error",
            error=error,
        )
        for index, call in enumerate(result.calls)
    ]


def _also_over(result: ParseResult, bound: int) -> ParseResult:
    """``result``, malformed and over ``bound``, its ``parse_error`` also naming the bound: the model
    must write the calls again (a parse error) and send fewer of them in each message; one error per
    call id, as providers want one answer per id."""
    error = result.error
    assert error is not None
    count = len(result.calls)
    message = (
        f"{error.message}; this message also proposes at least {count} calls and at most {bound} run "
        "from one message: send the calls again, fewer in each message"
    )
    details = {**error.details, "calls": count, "max_calls_per_message": bound}
    recovery = (*error.recovery, "send_fewer_calls")
    return dataclasses.replace(
        result, error=dataclasses.replace(error, message=message, details=details, recovery=recovery)
    )


def per_known_id(handed: Any, out: Sequence[Observation]) -> Sequence[Observation]:
    """The one ``parse_error`` a failed ``ParseResult`` handed to the session got, once per call id it
    knows (:func:`~actionspace.parse.call_ids`): the provider refuses the next request otherwise."""
    ids = call_ids(handed) if isinstance(handed, ParseResult) and handed.error and len(out) == 1 else ()
    return [dataclasses.replace(out[0], call_id=i) for i in ids] if ids else out


def fresh_tool(value: dict[str, Any]) -> dict[str, Any]:
    """A copy of a rendered tool whose dicts are copied two levels down (``function`` and its
    ``parameters``, ``input_schema`` and its ``properties``): a caller may change what it gets."""
    out = value.copy()
    for key, inner in value.items():
        if type(inner) is dict:
            copied = out[key] = inner.copy()
            for key2, inner2 in inner.items():
                if type(inner2) is dict:
                    copied[key2] = inner2.copy()
    return out
