"""A stored row read back as a :class:`~actionspace.trace.events.TraceEvent`, whatever it holds.

A store's file outlives the version that wrote it and can be edited by hand, so a row may hold
what this version never writes: ``data`` that is not JSON, JSON that is not an object, JSON
nested deeper than the reader follows, bytes where text belongs, a ``seq`` or ``ts`` that is not
a number. Reading such a run must not fail (``trace show``, ``export`` and replay read every event
of it), nor hand on a value of the wrong type: the row is read as an event of the declared types,
its oddity said in its data:

- ``data`` that is not a JSON object reads ``{"$unreadable": why, "chars": n, "prefix": …}`` (why:
  ``"not JSON"``, ``"nested too deep"``, ``"not a JSON object"``);
- bytes where text belongs are decoded as UTF-8 (bad bytes as U+FFFD), a number as its digits;
- a ``seq`` that is not an integer reads ``-1`` (no event is numbered so: an import refuses it),
  a ``ts`` that is not a number NaN.
"""

from __future__ import annotations

import json
import math
from typing import Any, Final

from actionspace.trace.events import TraceEvent

__all__ = ["stored_data", "stored_event", "stored_ts"]

_PREFIX_CHARS: Final = 512
"""Characters of an unreadable ``data`` kept in its place."""


def stored_event(
    run_id: Any, seq: Any, kind: Any, ts: Any, call_id: Any, data: Any, *, parsed: bool = False
) -> TraceEvent:
    """The event a stored row holds; ``data`` as the column gives it: JSON text, or (``parsed``)
    the value a driver parsed it to."""
    if (
        type(run_id) is str
        and type(seq) is int
        and type(kind) is str
        and type(ts) is float
        and (call_id is None or type(call_id) is str)
    ):  # every row this version writes: nothing more to look at
        return TraceEvent(
            run_id=run_id, seq=seq, kind=kind, ts=ts, call_id=call_id, data=stored_data(data, parsed=parsed)
        )
    return TraceEvent(
        run_id=_text(run_id),
        seq=_seq(seq),
        kind=_text(kind),
        ts=stored_ts(ts),
        call_id=None if call_id is None else _text(call_id),
        data=stored_data(data, parsed=parsed),
    )


def stored_data(data: Any, *, parsed: bool = False) -> dict[str, Any]:
    """A stored ``data`` column as an event's data: JSON text, or (``parsed``) what a driver parsed
    it to (a JSON string is then a ``str``, not text to parse)."""
    if type(data) is dict:
        return data
    if not parsed and isinstance(data, bytes | bytearray | memoryview):
        data = bytes(data).decode("utf-8", "replace")
    if not parsed and isinstance(data, str):
        try:
            data = json.loads(data)
        except RecursionError:
            return _unreadable("nested too deep", data)
        except ValueError:
            return _unreadable("not JSON", data)
    if type(data) is dict:
        return data
    return _unreadable("not a JSON object", _shown(data))


def _unreadable(why: str, text: str) -> dict[str, Any]:
    return {"$unreadable": why, "chars": len(text), "prefix": text[:_PREFIX_CHARS]}


def _shown(value: Any) -> str:
    """``value`` (parsed JSON that is not an object) as text, for the prefix kept of it."""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return repr(type(value))


def _text(value: Any) -> str:
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", "replace")
    return "" if value is None else repr(value)


def _seq(value: Any) -> int:
    if type(value) is int:
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdecimal() and len(value) < 30:
        return int(value)
    return -1


def stored_ts(value: Any) -> float:
    """A stored time as seconds: NaN when it is no number (a row edited by hand)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            return math.nan
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return math.nan
    return math.nan
