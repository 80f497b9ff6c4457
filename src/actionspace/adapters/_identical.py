"""Identical calls of one model message, when a framework runs the message's calls one by one.

A session reads a logical action as (turn, tool@version, canonical arguments, occurrence within
the message): a message proposing the same write twice makes two actions, and the message run
again replays both. A framework's tools node runs each call of the message through its own
``Runtime.acall``, so the adapter tells the runtime where each call stands among its identical
calls (:func:`occurrences`, counted as the validate stage counts a message of several calls),
and runs identical calls one at a time (:class:`OneAtATime`): the engine runs them so within a
message, and answers a proposal of an action while an identical one is still being sent
``unknown_commit``, never sending it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from actionspace._canonical import digest_json
from actionspace.catalog.spec import ToolSpec
from actionspace.errors import UnknownToolError
from actionspace.parse import parse
from actionspace.policy.principal import Principal
from actionspace.runtime import Runtime
from actionspace.validation.validator import identity_arguments, validate
from actionspace.validation.verdicts import Rejected

__all__ = ["FIRST", "Occurrence", "OneAtATime", "occurrences"]


@dataclass(frozen=True, slots=True)
class Occurrence:
    """Where a call stands among the identical calls of its model message."""

    count: int = 0
    """How many calls before it in the message are the same action (``Runtime.acall``'s
    ``occurrence``)."""
    action: Hashable | None = None
    """What names the action when the message proposes it more than once (None: once)."""


FIRST = Occurrence()
"""A call no earlier call of its message is identical to, and none later."""


def occurrences(
    rt: Runtime,
    calls: Sequence[tuple[str, Any]],
    *,
    run_id: str | None = None,
    principal: Principal | None = None,
) -> list[Occurrence]:
    """Per call of one model message — (tool name, arguments as the model sent them), in the
    message's order — its :class:`Occurrence`.

    Counted as the validate stage counts a message of several calls: only calls of a tool with
    side effects, by tool and arguments as the action is known by (JSON text read as the parser
    reads it, then :func:`~actionspace.validation.validator.identity_arguments`); a call the
    parser or the schema refuses counts for none. A tool with entity bindings is validated as
    the stage validates it, in run ``run_id`` for ``principal`` (default: the run's): its
    arguments are counted as bound (``"bob"`` and Bob's id are one action, as the stage sees
    them), and a call its resolvers or business validators refuse counts for none. Only tools
    named more than once are looked at, so a message of distinct tools costs a pass over their
    names. Never raises.
    """
    names = [name for name, _ in calls]
    repeated = {name for name in names if names.count(name) > 1}
    keys = [
        _action(rt, name, arguments, run_id, principal) if name in repeated else None
        for name, arguments in calls
    ]
    seen: dict[Hashable, int] = {}
    out: list[Occurrence] = []
    for key in keys:
        if key is None:
            out.append(FIRST)
            continue
        count = seen[key] = seen.get(key, -1) + 1
        out.append(Occurrence(count, key if keys.count(key) > 1 else None))
    return out


def _action(
    rt: Runtime, name: str, arguments: Any, run_id: str | None, principal: Principal | None
) -> tuple[str, bytes] | None:
    """(tool@version, digest of the arguments as the action is known by), or None for a call
    the engine would not count (no such tool, no side effects, arguments it refuses)."""
    try:
        spec = rt.catalog.get(name)
    except UnknownToolError:
        return None
    if not spec.has_side_effects:
        return None
    if isinstance(arguments, str):  # as the engine reads it: an OpenAI Responses item's text
        parsed = parse({"type": "function_call", "name": name, "arguments": arguments})
        if parsed.error is not None or len(parsed.calls) != 1:
            return None
        arguments = parsed.calls[0].arguments
    if spec.bindings:
        known = _bound(rt, spec, arguments, run_id, principal)
    else:
        known = identity_arguments(rt.engine.stages.compiler.get(spec), arguments)
    return None if known is None else (spec.key, digest_json(known))


def _bound(
    rt: Runtime, spec: ToolSpec, arguments: Any, run_id: str | None, principal: Principal | None
) -> Any:
    """The arguments the validate stage would know a call of ``spec`` (a tool with entity
    bindings) by — its resolvers and validators read live state, so they are run as the stage
    runs them, in the call's run — or None when the stage would refuse the call. A resolver or
    validator that raises makes the call count for none: the stage answers it with an error."""
    stages = rt.engine.stages
    try:
        run = rt.run_state(run_id)
        ctx = stages.ctx_factory(run, "", "", principal or run.principal)
        checked = validate(stages.compiler.get(spec), arguments, {}, ctx)
    except Exception:  # a resolver's fault is the stage's to report, not the count's
        return None
    return None if isinstance(checked.verdict, Rejected) else checked.arguments


class OneAtATime:
    """Runs the calls of one action (a run and an :attr:`Occurrence.action`) one at a time, from
    threads (:meth:`held`) or tasks (:meth:`aheld`); an action no call holds is forgotten."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._gates: dict[Hashable, tuple[Any, int]] = {}

    @contextlib.contextmanager
    def held(self, action: Hashable) -> Iterator[None]:
        """While the calling thread holds ``action``."""
        gate: threading.Lock = self._take(("thread", action), threading.Lock)
        try:
            with gate:
                yield
        finally:
            self._drop(("thread", action))

    @contextlib.asynccontextmanager
    async def aheld(self, action: Hashable) -> AsyncIterator[None]:
        """While the calling task holds ``action`` (tasks of one event loop wait for each other)."""
        key = ("task", id(asyncio.get_running_loop()), action)
        gate: asyncio.Lock = self._take(key, asyncio.Lock)
        try:
            async with gate:
                yield
        finally:
            self._drop(key)

    def _take(self, key: Hashable, make: Any) -> Any:
        with self._lock:
            gate, users = self._gates.get(key) or (make(), 0)
            self._gates[key] = (gate, users + 1)
            return gate

    def _drop(self, key: Hashable) -> None:
        with self._lock:
            gate, users = self._gates[key]
            if users > 1:
                self._gates[key] = (gate, users - 1)
            else:
                del self._gates[key]
