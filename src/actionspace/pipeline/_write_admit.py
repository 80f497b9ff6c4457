"""Whether a frame of a plain new write (pipeline/_write.py, sync; pipeline/_awrite.py, awaited)
takes a call: :func:`admitted`, decided before anything is recorded or changed but the run opened.

It decides what the general path's stages would (``FastPath.entry``, ``unfit_arguments``, the
compiled schema, ``verdict_of``, the arguments' canonical text) with as few of their calls as
their answers allow: the tool's precompiled entry is checked whole once per value of
:data:`~actionspace._epoch.EPOCH`, as pipeline/_direct.py checks it; arguments of a schema of typed
properties (:attr:`Entry.typed <actionspace.pipeline._entry.Entry.typed>`), each exactly of its
type, are known valid, settled and fit, and their canonical text is the C encoder's without a walk
of its own; the flow verdict kept in the entry is read without ``verdict_of``'s call. Anything else
is asked as before. ``tests/pipeline/test_w23_write_admission.py`` holds the two readings equal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from actionspace._epoch import EPOCH
from actionspace._json_values import unfit_arguments
from actionspace.ledger.keys import identity_digests
from actionspace.pipeline._write_parts import (
    _FLAT_ITEMS,
    _SAFE,
    Taken,
    _chunks,
    _digested,
    _join,
    _sha256,
)
from actionspace.pipeline.fast_effects import verdict_of
from actionspace.pipeline.runs import check_id
from actionspace.policy.principal import Principal
from actionspace.trace.sqlite import SqliteTraceStore
from actionspace.types import _EMPTY as _NO_SOURCES
from actionspace.types import ToolCall

if TYPE_CHECKING:
    from actionspace.pipeline.messages import Messages

__all__ = ["admitted"]

_WRITES = ("write", "external")


def admitted(
    messages: Messages, raw: ToolCall, run_id: str, node_id: str | None, principal: Principal | None
) -> Taken | None:
    """Whether a frame takes ``raw`` (see pipeline/_write.py), decided before anything is recorded
    or changed but the run opened (as the general path opens it first); None: it does not."""
    engine = messages.engine
    fast = engine.fast
    name, args, given_id = raw.name, raw.arguments, raw.id
    provenance = raw.provenance
    if (
        not fast.enabled
        or (provenance is not _NO_SOURCES and provenance)
        or type(name) is not str
        or not name
        or type(args) is not dict
        or not (given_id is None or type(given_id) is str)
    ):
        return None
    if node_id is not None and ("\x00" in node_id or not node_id.isascii()):
        check_id("node id", node_id)  # raised at the caller, as the general path raises it
    runs = engine.runs  # Engine.run and RunRegistry.known, written out for a run open here
    run = runs.live.get(run_id)
    if run is None:
        run = engine.run(run_id, principal)
    elif not runs.in_memory:  # what another process saved of it since, merged in
        runs.refresh(run)  # its usual course is its frame and the store's kept read (no ``rev`` frame)
    who = principal or run.principal
    # The entry as pipeline/_direct.py reads it: kept while its stamp is EPOCH's value (what it
    # was decided from moves the counter) and what the counter does not cover is the call's; else
    # checked whole and stamped (FastPath.stamped).
    ordered = engine._ordered
    entry = fast._entries.get((id(run), name))
    if (
        entry is None
        or entry.checked != EPOCH[0]
        or entry.run is not run
        or entry.principal is not who
        or entry.ordered is not ordered
        or run.disclosure
    ):
        entry = fast.stamped(run, name, who, ordered)
        if entry is None:
            return None
    if not entry.effects:
        return None
    spec = entry.spec
    if (
        spec.effect not in _WRITES  # ToolSpec.has_side_effects, read without the property's call
        or spec.bindings
        or not engine.driver.direct
        or engine.executor.closed
    ):
        return None
    # Arguments of an object of typed properties (Entry.typed), each exactly of its type, are
    # valid, settled and fit (what unfit_arguments and the compiled schema would say), and flat:
    # their canonical text is the C encoder's (_digested's, without its walk).
    typed, fits = entry.typed, False
    if typed is not None and _chunks is not None and len(args) <= _FLAT_ITEMS:
        types, required = typed
        for key, value in args.items():
            kind = type(value)
            if type(key) is not str or types.get(key) is not kind:
                break
            if kind is str:
                if not value.isascii() or "\x00" in value:
                    break
            elif kind is int and not -_SAFE <= value <= _SAFE:
                break
        else:
            fits = True
            for key in required:
                if key not in args:
                    fits = False
                    break
    if not fits and (unfit_arguments(args) is not None or not entry.compiled.validator.is_valid(args)):
        return None
    # What ready_effect decides, decided before anything is recorded: the verdict, the identity.
    verdict = entry.verdict  # verdict_of's kept verdict, read without its call
    if verdict is None or verdict[0] is not run.flow.context or verdict[1] != tuple(args):
        verdict = verdict_of(entry, run, who, args)
        if verdict is None:
            return None
    text: bytes | None
    if fits:
        made = _join(_chunks(args, 0)).encode()  # type: ignore[misc]
        text, digest = made, _sha256(made).hexdigest()
    else:
        text, digest = _digested(args)
    if text is None and node_id is None:
        digest, written = identity_digests(args)
        if written is not None:  # not NFC: the stages look for the node as written in the ledger
            return None
    texted = type(getattr(engine.sink, "__self__", None)) is SqliteTraceStore
    return engine, run, entry, verdict, text, digest, texted
