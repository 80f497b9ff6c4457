"""``create_app``: the FastAPI application of ``actionspace serve`` (JSON API, and the console pages)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Final

from fastapi import FastAPI
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from actionspace._version import package_version
from actionspace.errors import ConfigurationError
from actionspace.policy.principal import Principal
from actionspace.runtime import Runtime
from actionspace.service.api_approvals import approvals_router
from actionspace.service.api_catalog import METRICS_MAX_RUNS, catalog_router, health_router
from actionspace.service.api_ledger import ledger_router
from actionspace.service.api_runs import runs_router
from actionspace.service.auth import Auth, BeforeBody, admin_principal, new_token
from actionspace.service.deps import route_checks
from actionspace.service.errors import install_handlers
from actionspace.service.limits import DEFAULT_BODY_TIMEOUT_S, DEFAULT_MAX_BODY_BYTES, BodyLimits
from actionspace.service.metrics_answers import MetricsAnswers
from actionspace.service.proxies import TrustedProxies
from actionspace.service.quotas import (
    DEFAULT_MAX_HELD_BYTES,
    DEFAULT_MAX_LIVE_RUNS,
    RateLimit,
)
from actionspace.service.runner import BackgroundRuns, RunnerConfig
from actionspace.service.scoping import valid_tenant
from actionspace.service.tenant_lists import link_run_tenants

__all__ = ["create_app"]

DEFAULT_HEADERS: Final[Mapping[str, str]] = {
    "Content-Security-Policy": (
        "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}
"""Headers every response carries unless its route set its own (the console pages set a wider CSP)."""


class SecurityHeaders:
    """ASGI middleware adding :data:`DEFAULT_HEADERS` to every response, errors and 413s included."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in DEFAULT_HEADERS.items():
                    if name not in headers:
                        headers[name] = value
            await send(message)

        await self.app(scope, receive, send_with_headers)


def create_app(
    runtime: Runtime,
    *,
    tokens: Mapping[str, Principal] | None,
    runner: RunnerConfig | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S,
    distinct_approver: bool = False,
    trusted_proxies: Iterable[str] = (),
    rate_limit: RateLimit | str | None = None,
    max_live_runs: int | None = DEFAULT_MAX_LIVE_RUNS,
    max_held_bytes: int | None = DEFAULT_MAX_HELD_BYTES,
    metrics_max_runs: int = METRICS_MAX_RUNS,
) -> FastAPI:
    """The HTTP service over ``runtime``: API under ``/api``, console pages under ``/``.

    ``tokens`` maps each API token to the principal it acts as; its scopes gate the routes and the
    tools of the runs it starts; ``None`` makes one admin token (every scope), readable as
    ``app.state.admin_token``. ``runner`` configures background runs (approval polling, waits).
    ``max_body_bytes`` (default 16 MiB) bounds a request body; a larger one is answered 413 before
    authentication (see :mod:`actionspace.service.limits`); a request with a body is authenticated
    before its body is read; a body still arriving ``body_timeout_s`` (default 60 s) after the read
    began is answered 408. ``distinct_approver`` (default False) turns on the four-eyes rule: the
    principal that proposed a call may not approve it (403 ``permission_denied``; see
    :mod:`actionspace.approval.four_eyes`). ``trusted_proxies`` (CIDRs, default none): connections
    from these may name the client in ``X-Forwarded-For``, whose address then counts the unknown
    tokens (see :mod:`actionspace.service.proxies`). ``rate_limit`` (``"N/minute"``, ``"N/second"``,
    ``"N/hour"`` or a :class:`~actionspace.service.quotas.RateLimit`; default None, unbounded):
    requests each principal may make, then 429 ``rate_limited`` with ``Retry-After``.
    ``max_live_runs`` (default 1000; None: unbounded): runs one principal (its id, within its
    tenant) may have started or taken over from another server here and not yet ended (a run
    without room is not taken over); ``POST /api/runs`` past it is answered 429
    ``rate_limited`` with ``Retry-After``, nothing of that run written. ``max_held_bytes`` (default
    64 MiB; None: unbounded): bytes of submissions (plan or raw outputs, as compact JSON) the live
    runs of one tenant may hold, a run waiting for a person and one taken over from another server
    included (one without room is not taken over); a start past it is answered
    429 ``rate_limited`` with ``Retry-After`` (413 ``invalid_arguments`` for a submission larger than
    the bound itself), nothing of that run written. ``metrics_max_runs`` (default 10,000): the
    largest ``max_runs`` of ``/api/metrics`` (default 1000 runs), a larger one answered 422; an
    answer is kept 5 s per principal and question, and each tenant has one read at a time (see
    :mod:`actionspace.service.metrics_answers`).
    Raises ConfigurationError for a bad proxy network, rate limit, ``max_live_runs``,
    ``max_held_bytes`` or ``metrics_max_runs``, and for a
    token's principal whose tenant is not a string without U+0000 and unpaired surrogates (see
    :func:`~actionspace.service.scoping.valid_tenant`).
    The caller owns both the runtime and the background runner (``app.state.runner``): close
    the runner, then the runtime, when the server stops (``actionspace serve`` does).
    """
    limit = RateLimit.parse(rate_limit) if isinstance(rate_limit, str) else rate_limit
    bounds = (("metrics_max_runs", metrics_max_runs), ("max_held_bytes", max_held_bytes))
    for name, bound in (*bounds, ("max_live_runs", max_live_runs)):
        if bound is not None and bound < 1:  # before the runner is made: nothing to close
            raise ConfigurationError(f"{name} must be at least 1, got {bound!r}")
    _check_tenants(tokens.values() if tokens is not None else ())
    proxies = TrustedProxies.parse(trusted_proxies)
    table = dict(tokens) if tokens is not None else {}
    admin_token = None
    if tokens is None:
        admin_token = new_token()
        table[admin_token] = admin_principal()
    background = BackgroundRuns(runtime, runner, max_held_bytes=max_held_bytes, max_live_runs=max_live_runs)
    live_runs = background.live_runs  # runs taken over from other servers count against both
    held_bytes = background.held
    link_run_tenants(runtime)  # the memory stores' listings by tenant read the memory trace's

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        background.start()  # leases, and runs left by servers that died (see service/leases.py)
        yield

    app = FastAPI(
        lifespan=lifespan,
        title="actionspace",
        version=package_version(),
        description="Runs, traces, approvals, the commit ledger, the tool catalog and per-tool metrics.",
        docs_url=None,  # the console serves /docs from a vendored bundle: no CDN
        redoc_url=None,  # ReDoc's bundle fetches its logo from a CDN: not served
    )
    app.state.runtime = runtime
    app.state.runner = background
    app.state.live_runs = live_runs
    app.state.held_bytes = held_bytes
    app.state.metrics = MetricsAnswers()
    app.state.auth = Auth(table, rate_limit=limit, trusted_proxies=proxies)
    app.state.admin_token = admin_token
    install_handlers(app)
    app.add_middleware(
        BodyLimits, max_body_bytes=max_body_bytes, body_timeout_s=body_timeout_s, before_read=BeforeBody(app)
    )
    app.add_middleware(SecurityHeaders)  # added last: outermost, so it also sees BodyLimits' 413
    app.state.distinct_approver = distinct_approver
    approvals = approvals_router(distinct_approver=distinct_approver)
    catalog = catalog_router(metrics_max_runs=metrics_max_runs)
    app.include_router(health_router(), dependencies=route_checks(token=False))
    for router in (runs_router(), approvals, ledger_router(), catalog):
        app.include_router(router, dependencies=route_checks())
    _include_console(app)
    return app


def _check_tenants(principals: Iterable[Principal]) -> None:
    for principal in principals:
        if principal.tenant is not None and not valid_tenant(principal.tenant):
            raise ConfigurationError(
                f"principal {principal.id!r}: a tenant must be a string without U+0000 and unpaired"
                f" surrogates (every store keeps it as it is), got {principal.tenant!r}"[:300]
            )


def _include_console(app: FastAPI) -> None:
    try:
        from actionspace.service.console import console_router
    except ModuleNotFoundError as exc:  # the console pages are optional in a trimmed build
        if exc.name != "actionspace.service.console":
            raise
        return
    app.include_router(console_router())
