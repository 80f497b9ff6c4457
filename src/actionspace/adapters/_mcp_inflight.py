"""The requests a stdio server owes an answer, by their exact id: what every answer is matched against.

JSON-RPC answers a request under the same id, of the same type and value. The SDK's session matches
loosely (``coerce_request_id``): the string ``"1"`` (and ``" 1"``, ``"+1"``, ``"0_1"``, ``"١"``) passes
for the answer of request ``1``. And an answer whose id is null or missing (an error answer to a request
the server could not parse carries ``"id": null``) names no request at all, so the SDK drops it and the
call waits for its timeout. The stdio transport notes every request it writes (:meth:`Asked.sent`) and
hands each answer through :meth:`Asked.answer`:

* an answer under the exact id of a request in flight is that request's answer;
* an answer whose id the SDK would take for a request in flight, but of another type, is no answer:
  that request ends at once with ``MALFORMED_ANSWER`` (the server did answer it, against the protocol);
* an answer without an id ends the one request in flight, if there is exactly one (a long-lived
  ``subscriptions/listen`` stream is not counted: it was acknowledged when it opened): with the
  server's own error when that is a parse error or an invalid request (the only errors JSON-RPC lets
  go without an id; a write is then known not to have run), with ``MALFORMED_ANSWER`` otherwise (a
  write may have run: ``unknown_commit``). With several requests in flight nothing tells which one it
  answers: it is dropped, and each of them ends with its own answer or at its timeout, since ending
  the wrong one would report a call that ran as failed (and a write that ran as not run).

Over streamable HTTP every answer comes on the response of its own request, so its id is checked
there (``_mcp_http``).

The other way, a request the server sends goes to the session only while fewer than
:data:`MAX_SERVED` of the server's requests wait for their answer (:meth:`Asked.serve`): the SDK
spawns a task for each, and answers it (this client offers no sampling, roots or elicitation: an
error), but a server that floods requests and does not read its input leaves every answer unwritten,
each task held. Past the bound a request is dropped unanswered, and the session is told (an error it
logs). The requests are counted, not their ids: the SDK spawns a task for every request, even one
under the id of another still waiting, so a server repeating one id is held to the same bound. A request
the server cancels (``notifications/cancelled``) is no longer counted: the SDK ends its task unanswered
(:meth:`Asked.withdrawn`). Over streamable HTTP the same bound holds, counted until an answer's POST has
sent its body (``_mcp_http``, ``_mcp_served``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.jsonrpc_dispatcher import cancelled_request_id_from_params
from mcp.shared.message import SessionMessage
from mcp_types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
)

from actionspace.adapters._mcp_errors import MALFORMED_ANSWER

__all__ = ["LONG_LIVED", "MAX_ASKED", "MAX_SERVED", "Asked", "malformed"]

MAX_ASKED: Final = 4096
"""Most requests noted as in flight; past it the oldest is forgotten (its answer is then handed on as
it comes, and matched by the SDK as before)."""
MAX_SERVED: Final = 64
"""Most requests of the server handed to the session whose answers are not yet written."""
LONG_LIVED: Final = frozenset({"subscriptions/listen"})
"""Requests whose answer is a stream meant to stay open: never the one an id-less answer belongs to."""
_UNNAMED_OK: Final = frozenset({PARSE_ERROR, INVALID_REQUEST})
"""The errors JSON-RPC sends with a null id: the server could not read the request, so it did not run."""

_Key = tuple[type, RequestId]


def _key(request_id: RequestId) -> _Key:
    return (type(request_id), request_id)


def malformed(request_id: RequestId, said: str) -> SessionMessage:
    """A ``MALFORMED_ANSWER`` answer to request ``request_id``."""
    error = ErrorData(code=MALFORMED_ANSWER, message=f"the server's answer was malformed: {said}"[:500])
    return SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


class Asked:
    """The ids of the requests written to the server and not yet answered (one event loop's)."""

    def __init__(self, limit: int = MAX_ASKED) -> None:
        self._limit = limit
        self._methods: dict[_Key, str] = {}
        """(id type, id) → method, oldest first."""
        self._serving: dict[_Key, int] = {}
        """The server's requests handed to the session and not yet answered: how many under each id."""
        self._served = 0
        """How many requests ``_serving`` counts in all."""

    def __len__(self) -> int:
        return len(self._methods)

    def sent(self, message: JSONRPCMessage) -> None:
        """Note a message written to the server: a request is in flight until answered or cancelled."""
        if isinstance(message, JSONRPCResponse | JSONRPCError):
            if message.id is not None:
                self._answered(_key(message.id))
        elif isinstance(message, JSONRPCRequest):
            self._methods[_key(message.id)] = message.method
            if len(self._methods) > self._limit:
                del self._methods[next(iter(self._methods))]
        elif isinstance(message, JSONRPCNotification) and message.method == "notifications/cancelled":
            cancelled = cancelled_request_id_from_params(message.params)
            if cancelled is not None:  # its late answer, if any, is the session's to drop
                self._methods.pop(_key(cancelled), None)

    def answer(self, message: JSONRPCResponse | JSONRPCError) -> SessionMessage | Exception:
        """What the session gets for an answer read from the server (see the module docstring)."""
        if message.id is None:
            error = message.error if isinstance(message, JSONRPCError) else None
            return self.unnamed(error)
        key = _key(message.id)
        if self._methods.pop(key, None) is not None:
            return SessionMessage(message)
        meant = self._taken_for(message.id)
        if meant is None:  # a late or stray answer: the session drops it, as it matches nothing
            return SessionMessage(message)
        del self._methods[meant]
        kind = type(message.id).__name__
        said = f"it answers request {meant[1]!r} under the id {str(message.id)[:50]!r}, a {kind}"
        return malformed(meant[1], said)

    def serve(self, request: SessionMessage) -> SessionMessage | Exception:
        """A request read from the server, for the session while it has room (see the docstring)."""
        assert isinstance(request.message, JSONRPCRequest)
        if self._served >= MAX_SERVED:
            return ValueError(
                f"a request of the server ({request.message.method[:50]!r}) was dropped unanswered: "
                f"{MAX_SERVED} of its requests wait for their answers"
            )
        key = _key(request.message.id)
        self._serving[key] = self._serving.get(key, 0) + 1
        self._served += 1
        return request

    def withdrawn(self, notice: JSONRPCNotification) -> None:
        """A ``notifications/cancelled`` read from the server: the request of the server it names is no
        longer waited for. The SDK ends that request's task unanswered (it matches the id loosely, as
        here), so its place goes to the next request; before, it was held until the session ended."""
        cancelled = cancelled_request_id_from_params(notice.params)
        if cancelled is None:
            return
        loose = coerce_request_id(cancelled)
        for key in self._serving:
            if coerce_request_id(key[1]) == loose:
                self._answered(key)
                return

    @property
    def serving(self) -> int:
        """How many of the server's requests were handed on and wait for their answers."""
        return self._served

    def _answered(self, key: _Key) -> None:
        """One answer to the server's request ``key`` written: one fewer waits under that id."""
        waiting = self._serving.get(key, 0)
        if waiting <= 0:
            return  # an answer to nothing handed on (the session answers only what it got)
        self._served -= 1
        if waiting == 1:
            del self._serving[key]
        else:
            self._serving[key] = waiting - 1

    def unnamed(self, error: ErrorData | None) -> SessionMessage | Exception:
        """An answer with a null or missing id: the answer of the one request in flight, if one."""
        candidates = [key for key, method in self._methods.items() if method not in LONG_LIVED]
        if len(candidates) != 1:
            return ValueError(
                f"an answer without a request id was dropped: {len(candidates)} requests are in flight"
            )
        (key,) = candidates
        del self._methods[key]
        if error is not None and error.code in _UNNAMED_OK:
            return SessionMessage(JSONRPCError(jsonrpc="2.0", id=key[1], error=error))
        return malformed(key[1], "it names no request id")

    def named(self, request_ids: Iterable[RequestId]) -> list[RequestId]:
        """The requests in flight among ``request_ids`` (exact type and value), each once."""
        found: list[RequestId] = []
        for request_id in request_ids:
            if _key(request_id) in self._methods and request_id not in found:
                found.append(request_id)
                if len(found) == len(self._methods):
                    break
        return found

    def _taken_for(self, answered: RequestId) -> _Key | None:
        """The request in flight the SDK would take an answer under ``answered`` for, if any."""
        loose = coerce_request_id(answered)
        for key in self._methods:
            if coerce_request_id(key[1]) == loose:
                return key
        return None
