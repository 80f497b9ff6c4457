"""Post-conditions of a tool: what proves its effect, checked after it answered.

:func:`read_back` reads the resource again and compares it with what the call asked for (it proves
``delivered``); :func:`check_postconditions` runs a tool's ``verify`` list over a call that just ran
and says which completion level the evidence reached (``sent`` < ``accepted`` < ``delivered``).
Any :class:`~actionspace.observation.verify.Verifier` may be a post-condition; a plain callable
``(observation) -> Accepted | Rejected`` too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from actionspace._canonical import canonical_text, clip_end, normalize
from actionspace.catalog.spec import Completion
from actionspace.errors import ActionError, said
from actionspace.observation.verify import Observed, PostInput, Verdict, Verifier, reject
from actionspace.validation.verdicts import ACCEPTED, Rejected

__all__ = ["COMPLETION_LEVELS", "check_postconditions", "read_back"]

_MISSING: Final = object()
_SHOWN_CHARS: Final = 1024
"""Most characters of a compared value a read-back rejection's details carry."""

COMPLETION_LEVELS: tuple[Completion, ...] = ("sent", "accepted", "delivered")
"""Evidence that proves an effect, weakest first: the request left (``sent``), the tool answered
ok (``accepted``), a read of the resource afterwards shows it (``delivered``)."""


class _ReadBack(Verifier):
    name = "read_back"
    proves: Completion = "delivered"

    def __init__(self, fields: Mapping[str, str], read: Callable[[Mapping[str, Any], Any], Any]) -> None:
        if not fields:
            raise ValueError("read_back needs at least one field")
        self.fields, self.read = dict(fields), read

    def check(self, observed: Observed, claim: Any = None) -> Verdict:
        obs = observed if not isinstance(observed, Sequence) else observed[-1]
        args = claim if isinstance(claim, Mapping) else {}
        return self.after(PostInput(observation=obs, arguments=args, tool=obs.tool))

    def after(self, inp: PostInput) -> Verdict:
        obs = inp.observation
        stored = self.read(inp.arguments, obs.data)
        if not isinstance(stored, Mapping):
            return reject(
                "not_found_on_read_back",
                f"{obs.tool}: reading the resource back found nothing; the effect is not visible",
                recovery=("query_status", "observe_again"),
                call_id=obs.call_id,
                verifier=self.name,
            )
        data = obs.data if isinstance(obs.data, Mapping) else {}
        for arg, stored_field in self.fields.items():
            want = inp.arguments[arg] if arg in inp.arguments else data.get(arg, _MISSING)
            got = stored.get(stored_field, _MISSING)
            if want is _MISSING or got != want:
                expected = None if want is _MISSING else _shown(want)
                actual = None if got is _MISSING else _shown(got)
                return reject(
                    "read_back_mismatch",
                    f"{obs.tool}: read back, {stored_field} is "
                    f"{'<missing>' if got is _MISSING else clip_end(canonical_text(actual), 80)}, expected "
                    f"{'<missing>' if want is _MISSING else clip_end(canonical_text(expected), 80)}",
                    recovery=("observe_again", "take_another_path"),
                    call_id=obs.call_id,
                    verifier=self.name,
                    field=stored_field,
                    expected=expected,
                    actual=actual,
                )
        return ACCEPTED


def _shown(value: Any) -> Any:
    """``value`` as the JSON an error's details may carry: normalized (a store may hold any
    Python value), and replaced by its clipped canonical text past :data:`_SHOWN_CHARS`."""
    plain = normalize(value)
    text = canonical_text(plain)
    return plain if len(text) <= _SHOWN_CHARS else clip_end(text, _SHOWN_CHARS)


def read_back(
    *, fields: Sequence[str] | Mapping[str, str], read: Callable[[Mapping[str, Any], Any], Any]
) -> Verifier:
    """Post-condition proving ``delivered``: the resource, read again, holds what the call asked for.

    ``read(arguments, data)`` returns the stored record (a mapping; None when it is absent), e.g.
    ``lambda args, data: events.get(data["id"])``. ``fields`` names the arguments (or fields of the
    call's ``data``) whose values the record must hold; a mapping renames them
    (``{"when": "start"}``: argument ``when`` is stored as ``start``). As a plain verifier
    (``check(observation, claim=arguments)``) it does the same for one observation.
    """
    named = dict(fields) if isinstance(fields, Mapping) else {f: f for f in fields}
    return _ReadBack(named, read)


def check_postconditions(
    inp: PostInput, verifiers: Sequence[Any], required: Completion
) -> tuple[Completion | None, Rejected | None, list[dict[str, Any]]]:
    """Run a tool's post-conditions over a call that ran; (level reached, first rejection, events).

    A failed call reached ``sent`` when its outcome is ``unknown_commit`` (the request left), else
    nothing. A successful one reached ``accepted``, and ``delivered`` when every post-condition
    accepted and one of them proves delivery. A verifier that raises is a rejection (``internal``).
    """
    obs = inp.observation
    if obs.status == "error":
        sent = obs.error is not None and obs.error.category == "unknown_commit"
        return ("sent" if sent else None), None, []
    reached: Completion = "accepted"
    events: list[dict[str, Any]] = []
    for verifier in verifiers:
        name = str(getattr(verifier, "name", getattr(verifier, "__name__", type(verifier).__name__)))
        try:
            verdict = verifier.after(inp) if isinstance(verifier, Verifier) else verifier(obs)
        except Exception as exc:
            why = f"the post-condition {name} raised {type(exc).__name__}: {said(exc)}"
            verdict = Rejected(ActionError.of("internal", why))
        event: dict[str, Any] = {"tool": inp.tool, "verifier": name}
        if isinstance(verdict, Rejected):
            events.append({**event, "verdict": "rejected", "reason": verdict.error.details.get("reason")})
            details = {**verdict.error.details, "verifier": name, "completion": reached}
            error = dataclasses.replace(verdict.error, details=details)
            return reached, Rejected(error), events
        events.append({**event, "verdict": "accepted"})
        if getattr(verifier, "proves", "accepted") == "delivered":
            reached = "delivered"
    if COMPLETION_LEVELS.index(reached) < COMPLETION_LEVELS.index(required):
        error = ActionError.of(
            "permanent",
            f"{inp.tool} must be proved {required}; the evidence reaches {reached}",
            details={"reason": "completion_not_reached", "completion": reached, "required": required},
        )
        return reached, Rejected(error), events
    return reached, None, events
