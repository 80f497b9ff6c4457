"""Two steps of the tool contract around execution: the dry run instead of it, the post-conditions after it.

* :func:`dry_run` — the stages up to the gates accepted the call; instead of the tool, its
  ``preview`` runs (or, without one, the call is described). The observation carries the preview
  as ``data`` and ``diagnostics["dry_run"] = True``; nothing reaches the ledger or the tool.
* :func:`postcheck` — the tool's ``verify`` post-conditions over its observation, and the
  ``completion`` level the evidence reached (``diagnostics["completion"]``); a rejection turns the
  observation into an error naming the verifier (its effects are kept: they happened).
* :func:`gone_is_stale` — an HTTP 404/410 from a tool whose arguments were bound to entities
  (``bindings``) means the bound resource is gone: ``stale_reference``, not ``permanent``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from actionspace.catalog.functions import RESERVED_PARAMETERS
from actionspace.errors import ActionError
from actionspace.execution.errors import map_exception
from actionspace.execution.ready import Ready
from actionspace.observation.postconditions import check_postconditions
from actionspace.observation.verify import PostInput
from actionspace.outcomes import Failed, Outcome, Succeeded
from actionspace.trace.recorder import Recorder
from actionspace.types import Observation

__all__ = ["dry_run", "gone_is_stale", "postcheck", "preview_outcome"]


def preview_outcome(ready: Ready, run: Callable[[Any], Any]) -> Outcome:
    """Call the tool's preview with the call's arguments (``run`` awaits a coroutine it returns).

    Without a preview, the outcome describes the call that would run.
    """
    spec = ready.compiled.spec
    if spec.preview is None:
        return Succeeded(
            {
                "would_call": spec.key,
                "arguments": dict(ready.arguments),
                "effect": spec.effect,
                "writes": list(spec.writes),
            },
            1,
        )
    kwargs = {k: v for k, v in ready.kwargs.items() if k not in RESERVED_PARAMETERS}
    try:
        return Succeeded(run(spec.preview(**kwargs)), 1)
    except Exception as exc:
        return Failed(map_exception(exc, side_effects=False), 1)


def dry_run(
    ready: Ready, outcome: Outcome, shape: Callable[[Outcome], Observation], rec: Recorder
) -> Observation:
    """The observation of a dry run: ``shape`` the preview's outcome, mark it, record it."""
    spec = ready.compiled.spec
    rec.add(
        "dry_run",
        {
            "tool": spec.name,
            "version": spec.version,
            "node": ready.node_id,
            "preview": spec.preview is not None,
        },
    )
    obs = shape(outcome)
    diagnostics = {**obs.diagnostics, "dry_run": True}
    return dataclasses.replace(obs, effects=(), diagnostics=diagnostics)


def postcheck(ready: Ready, obs: Observation, rec: Recorder) -> Observation:
    """Run the tool's post-conditions over ``obs``; report the completion level reached."""
    spec = ready.compiled.spec
    required = spec.completion or "accepted"
    inp = PostInput(observation=obs, arguments=ready.arguments, tool=spec.key)
    reached, rejected, events = check_postconditions(inp, spec.verify, required)
    for event in events:
        rec.add("verified", event)
    completion: dict[str, Any] = {"reached": reached}
    if spec.completion is not None:
        completion["required"] = spec.completion
    diagnostics = {**obs.diagnostics, "completion": completion}
    if rejected is None:
        return dataclasses.replace(obs, diagnostics=diagnostics)
    error: ActionError = rejected.error
    return dataclasses.replace(obs, status="error", error=error, diagnostics=diagnostics)


def gone_is_stale(ready: Ready, obs: Observation) -> Observation:
    """``permanent`` HTTP 404/410 of a call whose arguments were bound to entities → ``stale_reference``."""
    error = obs.error
    if error is None or error.category != "permanent" or error.details.get("status") not in (404, 410):
        return obs
    bound = {name: ready.arguments[name] for name in ready.compiled.spec.bindings if name in ready.arguments}
    if not bound:
        return obs
    mapped = _stale(error, bound)
    return dataclasses.replace(obs, error=mapped)


def _stale(error: ActionError, bound: dict[str, Any]) -> ActionError:
    """The ``stale_reference`` a gone bound resource is (the same message, status and vendor code)."""
    return ActionError.of(
        "stale_reference",
        f"{error.message} (the resource bound from {', '.join(bound)} no longer exists; observe again)",
        details={**error.details, "bound": bound},
        vendor_code=error.vendor_code,
        resource_ids=[str(v) for v in bound.values()],
    )
