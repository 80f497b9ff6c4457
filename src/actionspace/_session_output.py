"""What a session reads from a model output before the engine runs it: its parse, and whether it
proposes more calls than one message may (:data:`MAX_CALLS_PER_MESSAGE`)."""

from __future__ import annotations

from typing import Any, Final

from actionspace.errors import ActionError
from actionspace.parse import ParseResult, StreamParser, parse
from actionspace.types import Observation

MAX_CALLS_PER_MESSAGE: Final = 512
"""Default of :attr:`Session.max_calls <actionspace.session.Session.max_calls>`: the most calls
one model message may propose; a message over it runs none of them. Providers send a few dozen at
most; the bound keeps a message of many thousands from running them all."""


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


def too_many(result: ParseResult, bound: int, run_id: str) -> list[Observation] | None:
    """None when ``result`` proposes at most ``bound`` calls; else one ``budget_exceeded``
    observation per call (none ran), each answering the call's own id."""
    count = len(result.calls)
    if count <= bound:
        return None
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
