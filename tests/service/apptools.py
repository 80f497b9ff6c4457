"""A small world for the API tests: tools with real effects, tokens per scope, a signalling store."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from fastapi import FastAPI
from fastapi.testclient import TestClient

from actionspace import Principal, Runtime, tool
from actionspace.approval.requests import ApprovalRequest, ApprovalStore
from actionspace.errors import ToolError
from actionspace.service import RunnerConfig, create_app

TOOL_SCOPES = ("read:*", "external:*", "write:*")

TOKENS: dict[str, Principal] = {
    "admin-token": Principal(id="admin", scopes=("*",)),
    "reader-token": Principal(
        id="reader", scopes=("runs:read", "approvals:read", "ledger:read", "catalog:read", "metrics:read")
    ),
    "approver-token": Principal(id="alice", scopes=("approvals:read", "approvals:decide")),
    "operator-token": Principal(id="olga", scopes=("ledger:read", "ledger:resolve")),
    "agent-token": Principal(id="agent", scopes=("runs:write", "runs:read", *TOOL_SCOPES)),
}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@dataclass
class World:
    """What the tools really did, whatever the runtime believes."""

    payments: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class SignallingApprovals:
    """The runtime's approval store, plus an event set whenever a request is filed."""

    def __init__(self, inner: ApprovalStore) -> None:
        self.inner = inner
        self.filed = threading.Event()
        self.requests: list[ApprovalRequest] = []

    def create(self, request: ApprovalRequest) -> ApprovalRequest:
        stored = self.inner.create(request)
        self.requests.append(stored)
        self.filed.set()
        return stored

    def wait_for_request(self, timeout: float = 10.0) -> ApprovalRequest:
        if not self.filed.wait(timeout):
            raise TimeoutError("no approval request was filed")
        self.filed.clear()
        return self.requests[-1]

    def get(self, request_id: str) -> ApprovalRequest | None:
        return self.inner.get(request_id)

    def find(self, run_id: str, tool: str, args_digest: str) -> list[ApprovalRequest]:
        return self.inner.find(run_id, tool, args_digest)

    def list_approved(self, *, expired: bool, now: float, limit: int = 100) -> list[ApprovalRequest]:
        listed: list[ApprovalRequest] = self.inner.list_approved(  # type: ignore[attr-defined]
            expired=expired, now=now, limit=limit
        )
        return listed

    def list(self, *, status: str | None = None, limit: int = 100) -> list[ApprovalRequest]:
        return self.inner.list(status=status, limit=limit)

    def update(
        self, request_id: str, expected: Sequence[str], request: ApprovalRequest
    ) -> ApprovalRequest | None:
        return self.inner.update(request_id, expected, request)

    def close(self) -> None:
        self.inner.close()


def build_runtime(world: World, store: str = "memory://") -> tuple[Runtime, SignallingApprovals]:
    """A runtime with a read tool, a payment that always needs approval, and a lossy notifier."""
    rt = Runtime(store, principal=Principal(id="service", scopes=TOOL_SCOPES), recover_on_start=False)

    @rt.tool(effect="read")
    def lookup(city: str) -> dict[str, Any]:
        """Weather of a city.

        Args:
            city: City name.
        """
        return {"city": city, "sky": "clear"}

    @rt.tool(effect="external", requires_approval=True, writes=["account:{to}"])
    def send_payment(to: str, amount: int) -> dict[str, Any]:
        """Pay someone.

        Args:
            to: Recipient account.
            amount: Amount in cents.
        """
        with world.lock:
            payment = {"id": f"p{len(world.payments) + 1}", "to": to, "amount": amount}
            world.payments.append(payment)
        return payment

    @rt.tool(effect="external", idempotency="none")
    def post_note(text: str) -> dict[str, Any]:
        """Post a note to a board whose answer gets lost.

        Args:
            text: The note.
        """
        with world.lock:
            world.notes.append(text)
        raise ToolError("unknown_commit", "the board closed the connection after accepting the note")

    signalling = SignallingApprovals(rt.approvals.store)
    rt.approvals.store = signalling
    return rt, signalling


@contextmanager
def served(
    store: str = "memory://", tokens: dict[str, Principal] | None = None
) -> Iterator[tuple[TestClient, Runtime, World, SignallingApprovals, FastAPI]]:
    """A TestClient over a fresh runtime; the runner and the runtime are closed afterwards."""
    world = World()
    rt, signalling = build_runtime(world, store)
    with serving(rt, tokens, poll_s=0.05) as (client, app):
        yield client, rt, world, signalling, app


@contextmanager
def serving(
    rt: Runtime, tokens: dict[str, Principal] | None = None, *, poll_s: float = 0.02
) -> Iterator[tuple[TestClient, FastAPI]]:
    """A TestClient over the app serving ``rt``; the runner and ``rt`` are closed afterwards."""
    app = create_app(
        rt, tokens=TOKENS if tokens is None else tokens, runner=RunnerConfig(approval_poll_s=poll_s)
    )
    try:
        with TestClient(app) as client:
            yield client, app
    finally:
        app.state.runner.close()
        rt.close()


@tool(effect="none")
def echo(text: str) -> dict[str, str]:
    """Echo a text back.

    Args:
        text: Anything.
    """
    return {"text": text}


EXTRA_TOOLS = [echo]
"""What ``actionspace serve --tools tests.service.apptools:EXTRA_TOOLS`` registers in the tests."""


@contextmanager
def uvicorn_server(app: FastAPI, **options: Any) -> Iterator[str]:
    """Serve ``app`` with a real uvicorn server at a free port on 127.0.0.1; yields its base URL.

    The socket listens before the server starts, so requests made at once wait in its backlog
    instead of failing. ``options``: more ``uvicorn.Config`` arguments.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, **{"log_level": "warning", "lifespan": "on", **options}))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
    assert not thread.is_alive(), "the uvicorn server did not stop"
