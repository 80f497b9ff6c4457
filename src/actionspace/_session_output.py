"""What a session reads from a model output before the engine runs it: its parse, and whether it
proposes more calls than one message may (:data:`MAX_CALLS_PER_MESSAGE`), recorded when it does
(:func:`recorded_refusal`); the copy of a rendered tool a session hands out (:func:`fresh_tool`);
the user's words of a turn the store did not save taken back (:func:`unheard`); and a message's
observations with each call id answered once (:func:`answered_once`, what ``call_all`` returns)."""

from __future__ import annotations

import dataclasses
import logging
import numbers
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from actionspace.discovery.render import once_per_id
from actionspace.errors import ActionError, ConfigurationError
from actionspace.parse import ParseResult, StreamParser, call_ids, parse
from actionspace.pipeline.observe import fail
from actionspace.trace.recorder import Recorder
from actionspace.trace.store_encoding import bounded_raw
from actionspace.types import Observation

if TYPE_CHECKING:
    from actionspace.pipeline import Engine
    from actionspace.policy.flow import FlowState
    from actionspace.session import SessionRuntime

_log = logging.getLogger("actionspace")

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


def checked_confidence(value: object) -> None:
    """Raise ConfigurationError unless ``value`` is a confidence ``Session.handle`` takes: None, a
    real number within [0, 1] (not a bool, not text), or a mapping of call id text to such a number
    or None. A wrong one is the caller's mistake, raised before the message is taken in, not
    answered to the model as a failure of each of its calls."""
    if isinstance(value, Mapping):
        for key, given in value.items():
            if type(key) is not str:
                raise ConfigurationError(f"a confidence is given per call id text, got the key {key!r:.100}")
            if given is not None:
                _one_confidence(given)
    elif value is not None:
        _one_confidence(value)


def _one_confidence(value: object) -> None:
    """Raise unless ``value`` is a real number within [0, 1]; NaN is within no bounds."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool) or not 0 <= float(value) <= 1:
        raise ConfigurationError(f"a confidence is a number within [0, 1], got {value!r:.100}")


def handed(output: Any) -> tuple[Any, ParseResult | None]:
    """The output as the engine reads it, and its parse when it may hold a plain answer: a
    ``StreamParser`` is its whole output; a ``ParseResult`` its own parse (recorded as its ``to_dict()``)."""
    if isinstance(output, StreamParser):
        output = output.output()
    elif isinstance(output, ParseResult):
        return output.to_dict(), output
    return output, parsed(output)


def owned(raw: Any, read: ParseResult | None) -> set[str] | None:
    """The call ids the model's message holds, before the run gives one to each call without:
    those its parse ``read`` knows, and for a message that did not parse those the engine answers
    it under (the ids ``raw`` holds); None when it was not parsed here (a ``ToolCall``)."""
    if read is None:
        return None
    ids = set(call_ids(read))
    if read.error is not None:
        ids.update(call_ids(raw))
    return ids


def parsed(raw: Any) -> ParseResult | None:
    """``parse(raw)`` for output that may hold a plain answer or a refusal (text, a provider dict
    or list, an SDK object); None for a ``ToolCall`` or any other object (calls, never an answer)."""
    if isinstance(raw, str | dict | list) or callable(getattr(raw, "model_dump", None)):
        return parse(raw)
    return None


def too_many(result: ParseResult, bound: int, run_id: str) -> list[Observation] | ParseResult | None:
    """None when ``result`` proposes at most ``bound`` calls; else one ``budget_exceeded``
    observation per call (none ran), each answering the call's own id; a call with none (or an
    empty one, or one that is no string) is given ``<run>:<index>``, or that with ``.<n>`` added
    when the message holds it already (:func:`_free`): no two calls answer under one id. A
    ``result`` that is also malformed comes back with its ``parse_error`` saying the bound too
    (:func:`_also_over`): the engine answers every call id the message holds with it, as it
    answers any malformed message."""
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
    calls = result.calls
    taken = {call.id for call in calls if type(call.id) is str and call.id}
    return [
        Observation(
            call_id=call.id if type(call.id) is str and call.id else _free(f"{run_id}:{index}", taken),
            tool=call.name if type(call.name) is str else "",
            status="error",
            error=error,
        )
        for index, call in enumerate(calls)
    ]


def _free(ident: str, taken: set[str]) -> str:
    """``ident``, or the first of ``ident.1``, ``ident.2``, … that is not in ``taken`` (the ids the
    message holds and those given so far), added to ``taken``: a model may write any id, one of the
    form the run gives too. Each step passes an id of ``taken``: at most ``len(taken)`` steps."""
    free, n = ident, 0
    while free in taken:
        n += 1
        free = f"{ident}.{n}"
    taken.add(free)
    return free


def recorded_refusal(
    engine: Engine, run_id: str, raw: Any, parsed: ParseResult, refused: Sequence[Observation]
) -> list[Observation]:
    """``refused`` (:func:`too_many`'s observations of ``raw``, parsed as ``parsed``) recorded as
    the engine records a malformed message (``pipeline/calls.parse_raw``, ``per_call_id``): the
    ``model_output``, the ``parsed`` event with the calls it names and the error naming the bound,
    then each call's ``budget_exceeded`` observation under its own call id, labelled as the
    runtime's errors are. Returns the observations as recorded. A store that fails is logged: none
    of the calls ran either way, and the model must still send fewer of them."""
    run = engine.run(run_id)
    rec = Recorder(run, None)
    rec.add("model_output", bounded_raw(raw, engine.artifacts))
    error = refused[0].error
    assert error is not None
    calls = tuple({"name": c.name, "id": c.id} for c in parsed.calls)
    rec.add("parsed", {"format": parsed.format, "calls": calls, "error": error.message[:300]})
    out: list[Observation] = []
    for obs in refused:
        assert obs.error is not None
        rec.call_id = obs.call_id
        out.append(fail(rec, obs.error, obs.call_id, obs.tool))  # as parse errors: no result kept
    try:
        engine.flush(rec)
    except Exception:
        _log.exception("actionspace: a message of run %s refused for its calls was not recorded", run.run_id)
    return out


def begin_turn(rt: SessionRuntime, run_id: str, words: str) -> None:
    """Begin the user's next turn of run ``run_id``, ``words`` its text (``Session.user``): saved
    before this returns. A store that fails to save it raises; the turn then stays where the store
    has it and its words are not heard (:func:`unheard`), so a retry begins it once."""
    run = rt.run_state(run_id)
    with run.lock:  # one turn at a time; one another process took first moves this one on
        run.turn += 1
        before = heard(run.flow)
        try:
            rt.user_input(run_id, words)  # saves the turn
        except BaseException:
            if run.base[0] < run.turn:  # not saved: not begun, as the store has it (a retry begins it)
                run.turn -= 1
                unheard(run.flow, before, words)
            raise
        rt.record(run_id, "user_turn", {"turn": run.turn})


def heard(flow: FlowState) -> tuple[list[str], int, Any]:
    """What ``flow`` holds of the user's words now: its texts, their count and their label."""
    return list(flow.user_texts), flow.user_count, flow.user_label


def unheard(flow: FlowState, before: tuple[list[str], int, Any], words: str) -> None:
    """Take ``words`` back from ``flow``, added since it held ``before`` (:func:`heard`) by a turn
    the store did not save: argument provenance must not credit the user with words of a turn
    that did not begin, nor twice once the turn is begun again. Words another process sent that
    a save attempt merged in meanwhile stay. The caller holds the run's lock (merges take it)."""
    texts, count, label = before
    now = flow.user_texts
    if flow.user_count == count + 1 and now and now[-1] == words:
        flow.user_texts, flow.user_count, flow.user_label = texts, count, label
    elif now and now[-1] == words:
        now.pop()
        flow.user_count -= 1
    else:
        return
    flow.version += 1  # as stored: the next save finds nothing of the turn to write
    flow.label_version += 1


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


def answered_once(out: Sequence[Observation]) -> list[Observation]:
    """``out``, a message's observations, with each call id answered once, by the first
    observation under it: what ``Runtime.call_all`` and ``acall_all`` return, as the trace and a
    session's rendered answer hold one per id (a message giving one id to two calls runs none of
    them; ``Turn.observations`` keeps one per proposed call)."""
    return list(once_per_id(out))
