"""Which run a gateway request is served in: its session's, a label's, or one it continues by id.

* **A session's run.** The first request of a session (an ``Mcp-Session-Id``, a stdio process;
  without a session, the principal within this gateway process) opens ``mcp_<16 hex>`` for its
  principal. Every result names its run in ``_meta["actionspace/run_id"]``.
* **Continuing a run.** A request whose ``_meta["actionspace/run_id"]`` is a run id the gateway
  reported (it starts with ``mcp_``) is served in that run when the run exists and was opened by
  the same principal (id and tenant, as the store keeps them, so it holds across gateway
  restarts and processes sharing a store). Otherwise it is ``permission_denied``, the same answer
  for a run that does not exist and for another principal's, so naming runs tells nothing.
* **A label.** Any other text names the principal's own run of that label
  (``mcp_<principal>_<label>_<digest>``): no principal reaches another's run by choosing a label.
  The digest is of the principal's id, so a label run that exists is served only to the
  principal (id and tenant) that opened it, as a run continued by id is: the same id given to a
  principal of another tenant (a changed config, a store shared by gateways) gets
  ``permission_denied``.
* **Not text.** A value that is neither text nor null (a number, a list holding the id, an
  object) is ``permission_denied``: serving it in the session's own run instead would send again
  a write the client means to retry in its earlier run.
* **Naming the action.** ``_meta["actionspace/node_id"]`` names a ``tools/call``'s logical action
  (:func:`node_of`) as non-empty text; null or none: the tool and its canonical arguments. Any
  other value is ``invalid_arguments`` and nothing is sent: read as none, two writes the client
  told apart by it would be one action, the second replayed and never sent.
* **Binding.** A session that named a run stays in it: its later requests without ``_meta`` are
  served there too (a client names its run once after reconnecting).
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from actionspace.errors import ActionError
from actionspace.policy.principal import Principal
from actionspace.runtime import Runtime

__all__ = ["NODE_META", "RUN_META", "GatewayRuns", "node_of"]

RUN_META = "actionspace/run_id"
"""``_meta`` key naming a request's run (a run id the gateway reported, or a label)."""
NODE_META = "actionspace/node_id"
"""``_meta`` key a client may set on ``tools/call`` to name the logical action (:func:`node_of`)."""

_MAX_SESSIONS = 10_000
"""Most session → run bindings (and checked run owners) kept; the oldest are forgotten first."""
_GIVEN = re.compile(r"mcp_[A-Za-z0-9_.:-]{1,300}")
"""The form of every run id the gateway gives out."""
_SAFE_ID = re.compile(r"[^A-Za-z0-9_.:-]")
_MAX_ID = 96


class GatewayRuns:
    """Session → run bindings of one gateway, and the ownership check of a continued run."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._boot = uuid.uuid4().hex[:12]
        self._runs: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._owned: OrderedDict[tuple[str, str], None] = OrderedDict()
        """(principal id, run id) pairs already found to belong together."""

    def run_for(self, principal: Principal, session: str | None, meta: Any) -> str | ActionError:
        """The run of a request (``session``: its session key, None when the transport has none).

        Reads the store to check the owner of a continued run (its errors propagate).
        """
        named = meta.get(RUN_META) if isinstance(meta, Mapping) else None
        if named is not None and not isinstance(named, str):
            return _not_text(named)
        if named:
            found = (
                self._continued(principal, named)
                if named.startswith("mcp_")
                else self._owned_by(principal, _label(principal, named), must_exist=False)
            )
            if session is not None and not isinstance(found, ActionError):
                self._bind((principal.id, session), found)
            return found
        key = (principal.id, session or f"process:{self._boot}")
        run_id = self._runs.get(key)
        if run_id is None:
            run_id = self._runtime.new_run(f"mcp_{uuid.uuid4().hex[:16]}", principal=principal)
            self._remember(principal, run_id)
        self._bind(key, run_id)
        return run_id

    def _continued(self, principal: Principal, run_id: str) -> str | ActionError:
        if not _GIVEN.fullmatch(run_id):
            return _not_yours(run_id)
        return self._owned_by(principal, run_id, must_exist=True)

    def _owned_by(self, principal: Principal, run_id: str, *, must_exist: bool) -> str | ActionError:
        """``run_id`` when the principal opened it (or, unless ``must_exist``, it does not exist
        yet: the principal's first use opens it), else ``permission_denied``."""
        if (principal.id, run_id) in self._owned:
            self._owned.move_to_end((principal.id, run_id))
            return run_id
        if self._runtime.trace.next_seq(run_id) == 0:
            # not remembered: until it exists, another process may open it first
            return _not_yours(run_id) if must_exist else run_id
        owner = self._runtime.run_state(run_id).principal
        if (owner.id, owner.tenant) != (principal.id, principal.tenant):
            return _not_yours(run_id)
        self._remember(principal, run_id)
        return run_id

    def _remember(self, principal: Principal, run_id: str) -> None:
        self._owned[(principal.id, run_id)] = None
        while len(self._owned) > _MAX_SESSIONS:
            self._owned.popitem(last=False)

    def _bind(self, key: tuple[str, str], run_id: str) -> None:
        self._runs[key] = run_id
        self._runs.move_to_end(key)
        while len(self._runs) > _MAX_SESSIONS:
            self._runs.popitem(last=False)


def _not_yours(run_id: str) -> ActionError:
    return ActionError.of(
        "permission_denied",
        f"{run_id[:120]!a} is not a run of yours: it does not exist or another principal opened it; "
        f"leave _meta[{RUN_META!r}] out to start a new run",
    )


def _not_text(value: object) -> ActionError:
    return ActionError.of(
        "permission_denied",
        f"_meta[{RUN_META!r}] names no run: a run id the gateway reported, or a label, is text "
        f"(this is {type(value).__name__}); leave it out to start a new run",
    )


def _label(principal: Principal, label: str) -> str:
    # one principal's label never names another's run: "ops" labelling "admin_x" reads like
    # "ops_admin" labelling "x", the digest of both parts keeps them apart
    return f"mcp_{safe(principal.id)}_{distinct(label, [principal.id, label])}"


def safe(value: str) -> str:
    """``value`` with every character an id may not hold replaced by ``_``, cut to 96 characters."""
    return _SAFE_ID.sub("_", value)[:_MAX_ID]


def distinct(value: str, identity: object) -> str:
    """``value`` made safe for an id, with a digest of ``identity``: two values that read alike
    once unsafe characters became ``_`` or a long value was cut ("job/1", "job_1") stay apart."""
    digest = hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:16]
    return f"{safe(value)}_{digest}"


def node_of(meta: Any) -> str | ActionError | None:
    """The node a ``tools/call`` names in its ``_meta`` (see the module docstring); None: the
    engine's node identity (the run as the turn, tool@version, canonical arguments)."""
    named = meta.get(NODE_META) if isinstance(meta, Mapping) else None
    if named is None:
        return None
    if type(named) is str and named:
        return f"c:{distinct(named, named)}"
    what = "empty text" if named == "" else f"a {type(named).__name__}"
    return ActionError.of(
        "invalid_arguments",
        f'_meta["{NODE_META}"] names a logical action as non-empty text, not {what}: nothing was sent',
        details={"meta": NODE_META},
    )
