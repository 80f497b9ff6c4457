"""``actionspace serve``: the JSON API and the console over a store, with uvicorn.

By default it serves the demo's store (``ACTIONSPACE_STORE`` or ``~/.actionspace``) with the demo's
tools registered, so that after ``actionspace demo`` the console shows the demo's runs and a person
can approve the call the demo left pending. Without ``--token`` it makes one admin token and prints
the console's URL with it.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import quote, urlencode

import typer

from actionspace.errors import ConfigurationError

if TYPE_CHECKING:  # the runtime is imported by the command, not by ``actionspace --help``
    from fastapi import FastAPI

    from actionspace.policy.principal import Principal
    from actionspace.runtime import Runtime

__all__ = ["Served", "prepare", "serve_command", "uvicorn_options"]


@dataclass
class Served:
    """Everything ``serve`` starts: the app, its console URL (with the token) and what to close."""

    app: FastAPI
    url: str
    token: str
    runtime: Runtime
    stack: ExitStack


def prepare(
    *,
    store: str | None,
    host: str,
    port: int,
    token: str | None,
    tools: Sequence[str] = (),
    demo: bool = True,
    tokens_file: str | None = None,
    body_timeout_s: float | None = None,
    distinct_approver: bool = False,
    trusted_proxies: Sequence[str] = (),
    rate_limit: str | None = None,
    max_live_runs: int | None = None,
    max_held_bytes: int | None = None,
    metrics_max_runs: int | None = None,
) -> Served:
    """Build the runtime and the app of ``actionspace serve`` (without starting the server).

    ``tokens_file``: a JSON object mapping API tokens to principals (``{"id", "scopes",
    "tenant"}``), served besides the admin token. Raises ConfigurationError for a bad file.
    ``body_timeout_s``: seconds a request body may take to arrive (None: the app's default, 60 s).
    ``distinct_approver``: the four-eyes rule (default off): a call's proposer may not approve it.
    ``trusted_proxies``: CIDRs whose ``X-Forwarded-For`` names the client (default none).
    ``rate_limit``: requests per principal, ``"N/minute"`` (default None: unbounded).
    ``max_live_runs``: runs one principal may have live at once (None: the app's default, 1000).
    ``max_held_bytes``: bytes of submissions one tenant's live runs may hold (None: 64 MiB).
    ``metrics_max_runs``: most runs one ``/api/metrics`` request reads (None: 10,000).
    Raises ConfigurationError for a bad proxy network or rate limit, before opening the store.
    """
    from actionspace.service.api_catalog import METRICS_MAX_RUNS
    from actionspace.service.app import create_app
    from actionspace.service.auth import admin_principal, new_token
    from actionspace.service.limits import DEFAULT_BODY_TIMEOUT_S
    from actionspace.service.proxies import TrustedProxies
    from actionspace.service.quotas import DEFAULT_MAX_HELD_BYTES, DEFAULT_MAX_LIVE_RUNS, RateLimit
    from actionspace.trace.store import default_store_url

    limit = None if rate_limit is None else RateLimit.parse(rate_limit)
    TrustedProxies.parse(trusted_proxies)  # refused before the store is opened
    url = store or default_store_url()
    stack = ExitStack()
    try:
        if demo:
            from actionspace.service.demo_runtime import demo_runtime

            rt = demo_runtime(url, stack)
        else:
            from actionspace.runtime import Runtime

            rt = Runtime(url)
            stack.callback(rt.close)
        for item in _load_tools(tools):
            rt.register(item)
        secret = token or new_token()
        table = {**_read_tokens(tokens_file), secret: admin_principal()}
        body_s = DEFAULT_BODY_TIMEOUT_S if body_timeout_s is None else body_timeout_s
        app = create_app(
            rt,
            tokens=table,
            body_timeout_s=body_s,
            distinct_approver=distinct_approver,
            trusted_proxies=trusted_proxies,
            rate_limit=limit,
            max_live_runs=DEFAULT_MAX_LIVE_RUNS if max_live_runs is None else max_live_runs,
            max_held_bytes=DEFAULT_MAX_HELD_BYTES if max_held_bytes is None else max_held_bytes,
            metrics_max_runs=METRICS_MAX_RUNS if metrics_max_runs is None else metrics_max_runs,
        )
        stack.callback(app.state.runner.close)  # closed before the runtime (callbacks run in reverse)
    except BaseException:
        stack.close()
        raise
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    if ":" in shown:  # an IPv6 address is bracketed in a URL
        shown = f"[{shown}]"
    # any token, percent-encoded: "+", "&", "#" or "%" would otherwise change what the page reads
    query = urlencode({"token": secret}, quote_via=quote)
    return Served(app=app, url=f"http://{shown}:{port}/?{query}", token=secret, runtime=rt, stack=stack)


def _read_tokens(path: str | None) -> dict[str, Principal]:
    """The token table of ``--tokens FILE`` (empty without one)."""
    if path is None:
        return {}
    from actionspace.policy.principal import Principal

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError("expected a JSON object of token: principal")
        return {str(t): Principal.from_dict(p) for t, p in data.items()}
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ConfigurationError(f"--tokens {path}: {exc}") from exc


def _load_tools(refs: Iterable[str]) -> list[Any]:
    """``module:attr`` → the ToolSpec, ``@tool`` function, or list of them it names."""
    from actionspace.catalog.spec import ToolSpec

    out: list[Any] = []
    for ref in refs:
        module_name, sep, attr = ref.partition(":")
        if not sep or not module_name or not attr:
            raise ConfigurationError(f"--tools takes module:attr, got {ref!r}")
        value: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            value = getattr(value, part)
        if isinstance(value, ToolSpec) or callable(value):
            out.append(value)
        elif isinstance(value, Iterable):
            out.extend(value)
        else:
            raise ConfigurationError(f"{ref} is neither a tool nor a list of tools")
    return out


def serve_command(
    store: Annotated[
        str | None,
        typer.Option(
            metavar="URL", help="Store URL (default: ACTIONSPACE_STORE or ~/.actionspace, like demo)."
        ),
    ] = None,
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8765,
    token: Annotated[
        str | None,
        typer.Option(help="The admin API token (default: a new random one, printed with the URL)."),
    ] = None,
    tools: Annotated[
        list[str] | None,
        typer.Option("--tools", metavar="MODULE:ATTR", help="Register more tools (repeatable)."),
    ] = None,
    demo: Annotated[bool, typer.Option("--demo/--no-demo", help="Register the demo's tools.")] = True,
    tokens_file: Annotated[
        str | None,
        typer.Option(
            "--tokens",
            metavar="FILE",
            help='More API tokens: a JSON object {"<token>": {"id", "scopes", "tenant"}}.',
        ),
    ] = None,
    head_timeout: Annotated[
        float,
        typer.Option(min=0.001, metavar="SECONDS", help="Longest wait for a request's line and headers."),
    ] = 10.0,
    body_timeout: Annotated[
        float, typer.Option(min=0.001, metavar="SECONDS", help="Longest wait for a request's whole body.")
    ] = 60.0,
    distinct_approver: Annotated[
        bool,
        typer.Option(
            "--distinct-approver",
            help="Four-eyes rule: the principal that proposed a call may not approve it (403).",
        ),
    ] = False,
    trusted_proxy: Annotated[
        list[str] | None,
        typer.Option(
            "--trusted-proxy",
            metavar="CIDR",
            help="A reverse proxy whose X-Forwarded-For names the client, for the limit on unknown "
            "tokens (repeatable; default: none, the header is ignored).",
        ),
    ] = None,
    rate_limit: Annotated[
        str | None,
        typer.Option(
            "--rate-limit",
            metavar="N/minute",
            help="Requests each token's principal may make (N/second, N/minute or N/hour), then 429 "
            "(default: unlimited).",
        ),
    ] = None,
    max_live_runs: Annotated[
        int | None,
        typer.Option(
            "--max-live-runs",
            min=1,
            metavar="N",
            help="Runs each token's principal may have started and not yet ended, then 429 (default: 1000).",
        ),
    ] = None,
    max_held_bytes: Annotated[
        int | None,
        typer.Option(
            "--max-held-bytes",
            min=1,
            metavar="N",
            help="Bytes of submissions (plans, raw outputs, as JSON) the live runs of one tenant may hold,"
            " waiting ones included, then 429 (default: 67108864, 64 MiB).",
        ),
    ] = None,
    metrics_max_runs: Annotated[
        int | None,
        typer.Option(
            "--metrics-max-runs",
            min=1,
            metavar="N",
            help="Most runs one /api/metrics request may read (its max_runs), a larger one 422"
            " (default: 10000).",
        ),
    ] = None,
    max_connections: Annotated[
        int,
        typer.Option(
            "--max-connections",
            min=1,
            metavar="N",
            help="Connections served at once; a connection over them is answered 503 (transient) and"
            " closed (default: 512).",
        ),
    ] = 512,
) -> None:
    """Serve the JSON API and the web console (approvals, runs, traces, ledger, tools, metrics)."""
    from actionspace._extras import require

    try:
        require("fastapi", "service", "actionspace serve")
        uvicorn = require("uvicorn", "service", "actionspace serve")
        served = prepare(
            store=store,
            host=host,
            port=port,
            token=token,
            tools=tools or (),
            demo=demo,
            tokens_file=tokens_file,
            body_timeout_s=body_timeout,
            distinct_approver=distinct_approver,
            trusted_proxies=trusted_proxy or (),
            rate_limit=rate_limit,
            max_live_runs=max_live_runs,
            max_held_bytes=max_held_bytes,
            metrics_max_runs=metrics_max_runs,
        )
    except (ConfigurationError, ImportError, AttributeError) as exc:
        from actionspace._cli_tables import one_line

        typer.echo(one_line(str(exc)), err=True)
        raise typer.Exit(1) from exc
    with served.stack:
        from actionspace._cli_tables import shown_store

        typer.echo(f"actionspace store: {shown_store(served.runtime.store_url)}")
        typer.echo(f"actionspace console: {served.url}")
        options = uvicorn_options(head_timeout, body_timeout, max_connections=max_connections)
        uvicorn.run(served.app, host=host, port=port, **options)


def uvicorn_options(
    head_timeout_s: float, body_timeout_s: float, *, max_connections: int | None = None
) -> dict[str, Any]:
    """What ``serve`` passes ``uvicorn.run`` besides the app, host and port.

    A slow client is answered 408 at each deadline, so it holds neither a connection nor the
    shutdown (the app's own body deadline answers first, the protocol's is the backstop).
    ``X-Forwarded-For`` is read by the app, and only from ``--trusted-proxy``: uvicorn's own
    reading of it is off, since it trusts 127.0.0.1 by default, where any local process could
    name itself another client and so escape the limit on unknown tokens. ``max_connections``
    (default :data:`~actionspace.service.slow_clients.DEFAULT_MAX_CONNECTIONS`) caps the
    connections served at once: one over it is answered a typed 503 and closed, so a flood of
    connections costs the server a bounded number of them.
    """
    from actionspace.service.slow_clients import DEFAULT_MAX_CONNECTIONS, deadlines

    cap = DEFAULT_MAX_CONNECTIONS if max_connections is None else max_connections
    protocol = deadlines(head_timeout_s, body_timeout_s + 1.0, max_connections=cap)
    return {"log_level": "warning", "http": protocol, "proxy_headers": False}
