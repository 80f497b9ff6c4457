"""MCP gateway: serve the governed union of configured tools to any MCP client.

``actionspace gateway --config gateway.toml [--transport stdio|http] [--host H] [--port P]``
serves, over stdio or streamable HTTP, the Python tools and upstream MCP servers the file names
(see :mod:`actionspace.adapters._gateway_config` for the file). Every ``tools/call`` goes through
:meth:`Runtime.acall`, so validation, approvals, the ledger, labels, budgets and the trace apply
exactly as for a library caller::

    from actionspace.adapters.mcp_gateway import Gateway

    gateway = Gateway.from_file("gateway.toml")
    gateway.run("http")                  # or "stdio"; blocks until interrupted

Who calls, and in which run:

* **Principal.** Over HTTP, ``Authorization: Bearer <token>`` names the principal (a missing or
  unknown token is answered 401 before MCP sees the request; a session id is usable only by the
  principal that opened it; see ``_gateway_http``). Over stdio, the token in the
  ``ACTIONSPACE_GATEWAY_TOKEN`` environment variable, else ``[gateway] stdio_principal``.
  ``tools/list`` shows only the tools the principal holds every scope for; the run is offered
  exactly those, so another tool's name is ``unknown_tool``.
* **Run.** One run per MCP session (per stdio or in-process connection; per ``Mcp-Session-Id``
  over HTTP; per principal and gateway process when the transport has no session), named in
  every result's ``_meta["actionspace/run_id"]``. A client that reconnects continues its run by naming that id
  in a request's ``_meta["actionspace/run_id"]`` (only the principal that opened the run may;
  see ``_gateway_runs``), so its ledger, budget and provenance carry over.
* **Node.** MCP gives ``tools/call`` no idempotency key. A write's node id (the ledger's unit of
  "one logical action") is ``_meta["actionspace/node_id"]`` when the client gives one, else the
  engine's node identity (the run as the turn, tool@version, the canonical arguments; see
  docs/exactly-once.md): the same write repeated in a run is the same action and is replayed from
  the ledger, never sent twice. A client that means two identical writes gives them two node ids
  (non-empty text: any other node id is ``invalid_arguments``, nothing sent).

Results: the observation envelope is ``structuredContent`` (``["error"]["category"]``,
``["recovery"]``, ``["field_errors"]``...), the text content is a readable summary, and
``isError`` is set exactly when the observation is an error (see ``_gateway_results``). A call
held for approval is ``needs_approval`` with ``details.request_id``; once a person approves it
(``rt.approvals.approve`` or ``actionspace approvals approve``), the client's retry runs once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tomllib
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from actionspace._extras import missing

try:
    import anyio
    import anyio.to_thread
    import mcp_types as types
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import NotificationOptions, Server
    from mcp.server.session import ServerSession
    from mcp.shared.exceptions import MCPError
    from starlette.applications import Starlette
    from starlette.types import ASGIApp
except ImportError as exc:  # the core install: one line naming the extra, not the SDK's module
    raise missing("actionspace.adapters.mcp_gateway", "mcp", exc) from exc

from actionspace.adapters._gateway_announce import Announcer
from actionspace.adapters._gateway_config import GatewayConfig, UpstreamConfig, load_config, parse_config
from actionspace.adapters._gateway_http import IDLE_TIMEOUT_S, HttpGuard, bearer, bound_host, sdk_security
from actionspace.adapters._gateway_results import to_call_result
from actionspace.adapters._gateway_runs import NODE_META, RUN_META, GatewayRuns, node_of
from actionspace.adapters._gateway_tools import load_python_tools, mcp_tool
from actionspace.catalog.registry import Catalog
from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ActionError, ConfigurationError, said_safely, store_unavailable
from actionspace.policy.principal import Principal, authorize
from actionspace.runtime import Runtime
from actionspace.service.proxies import TrustedProxies
from actionspace.types import Observation, ToolCall
from actionspace.validation.verdicts import Rejected

__all__ = ["NODE_META", "RUN_META", "TOKEN_ENV", "Gateway", "Transport"]

_log = logging.getLogger("actionspace.gateway")

Transport = Literal["stdio", "http"]

TOKEN_ENV = "ACTIONSPACE_GATEWAY_TOKEN"
"""Environment variable holding the API token of a stdio session's principal."""

_MAX_SESSIONS = 10_000
"""Most sessions (and runs' offers) remembered; the oldest are forgotten first (runs stay in the store)."""
_CONNECTION_KEY = "actionspace.session"
"""Key of a connection's session key in the state its lifespan yields."""
_ANNOUNCE_TIMEOUT_S = 5.0
"""Longest wait to hand one session a list-change notification before giving up on it."""


class Gateway:
    """The governed tools of one config, served over MCP.

    ``runtime``: use this Runtime instead of building one from ``config.store`` (tests, embedding);
    the config's tools are registered into it either way. Raises ConfigurationError for a tool
    that cannot be imported or an upstream server that cannot be reached.
    """

    def __init__(self, config: GatewayConfig, *, runtime: Runtime | None = None) -> None:
        self.config = config
        self.runtime = runtime if runtime is not None else Runtime(store=config.store)
        self._owns_runtime = runtime is None
        self.runs = GatewayRuns(self.runtime)
        self._toolsets: list[Any] = []
        for ref in config.tools:
            for spec in load_python_tools(ref, pythonpath=config.pythonpath):
                self.runtime.register(config.approval.apply(spec))
        self._upstreams_open = False
        self._listeners: OrderedDict[str, ServerSession] = OrderedDict()
        """Session key → a request handle of that session, to announce tool list changes on."""
        self._announcer = Announcer(self.announce_tools_changed)

    @classmethod
    def from_file(cls, path: str | Path, *, runtime: Runtime | None = None) -> Gateway:
        """A gateway for the TOML file at ``path`` (see ``_gateway_config``)."""
        return cls(load_config(path), runtime=runtime)

    @classmethod
    def from_toml(
        cls,
        text: str,
        *,
        runtime: Runtime | None = None,
        base: str | Path = ".",
        environ: Mapping[str, str] | None = None,
    ) -> Gateway:
        """A gateway for config text (``base``: the folder relative paths start from)."""
        raw = tomllib.loads(text)
        env = os.environ if environ is None else environ
        return cls(parse_config(raw, base=Path(base), environ=env), runtime=runtime)

    # ------------------------------------------------------------------ upstream servers
    def open_upstreams(self) -> None:
        """Connect every configured upstream MCP server and register its tools (idempotent)."""
        if self._upstreams_open:
            return
        self._upstreams_open = True
        for upstream in self.config.upstreams:
            self._toolsets.append(self._attach(upstream))

    def _attach(self, upstream: UpstreamConfig) -> Any:
        from actionspace.adapters.mcp_client import HttpServer, McpToolset, StdioServer

        server: StdioServer | HttpServer
        if upstream.url is not None:
            server = HttpServer(
                upstream.url,
                headers=dict(upstream.headers) or None,
                name=upstream.name,
                allowlisted=upstream.allowlisted,
                prefix=upstream.tool_prefix,
                reconnect=upstream.reconnect,
            )
        else:
            server = StdioServer(
                upstream.command[0],
                args=upstream.command[1:],
                env=dict(upstream.env) or None,
                name=upstream.name,
                allowlisted=upstream.allowlisted,
                prefix=upstream.tool_prefix,
                reconnect=upstream.reconnect,
            )
        toolset = McpToolset(server)
        toolset.register(_PolicyTarget(self.runtime, self.config))
        toolset.on_change(self._upstream_changed)
        return toolset

    def _upstream_changed(self, added: list[ToolSpec], retired: list[ToolSpec]) -> None:
        """An upstream server's tools changed (called on its connection's thread): tell our clients.

        Returns at once; the serving loop announces it (coalesced with other changes).
        """
        self._announcer.changed()

    async def announce_tools_changed(self) -> int:
        """Send ``notifications/tools/list_changed`` to every live session; returns how many heard it.

        Sessions are told concurrently, each within ``_ANNOUNCE_TIMEOUT_S``; one that does not take
        it in time is forgotten. Clients list again and get the new versions; a call built on a
        retired definition gets ``version_mismatch`` with the current one until then.
        """
        told = 0

        async def tell(key: str, session: ServerSession) -> None:
            nonlocal told
            try:
                with anyio.fail_after(_ANNOUNCE_TIMEOUT_S):
                    await session.send_tool_list_changed()
                told += 1
            except Exception:  # that session is closed or stuck: forget it (unless it came back)
                if self._listeners.get(key) is session:
                    del self._listeners[key]

        async with anyio.create_task_group() as group:
            for key, session in list(self._listeners.items()):
                group.start_soon(tell, key, session)
        return told

    def _remember(self, ctx: ServerRequestContext[Any, Any]) -> None:
        key = _session_of(ctx)
        if key is None:
            return  # no session to address (stateless HTTP): such clients poll tools/list
        self._listeners[key] = ctx.session
        self._listeners.move_to_end(key)
        while len(self._listeners) > _MAX_SESSIONS:
            self._listeners.popitem(last=False)

    def close(self) -> None:
        """Disconnect upstream servers and, when the gateway built it, close the runtime."""
        for toolset in self._toolsets:
            toolset.close()
        self._toolsets.clear()
        if self._owns_runtime:
            self.runtime.close()

    # ------------------------------------------------------------------ principals and runs
    def principal_for_token(self, token: str | None) -> Principal | None:
        """The principal an API token names (None: no such token)."""
        return self.config.principal_by_token(token) if token else None

    def stdio_principal(self, environ: Mapping[str, str] | None = None) -> Principal:
        """Who a stdio session acts for: ``ACTIONSPACE_GATEWAY_TOKEN``, else ``stdio_principal``."""
        env = os.environ if environ is None else environ
        token = env.get(TOKEN_ENV)
        if token:
            principal = self.principal_for_token(token)
            if principal is None:
                raise ConfigurationError(f"{TOKEN_ENV} holds no configured principal's token")
            return principal
        if self.config.stdio_principal is not None:
            found = self.config.principal_by_id(self.config.stdio_principal)
            assert found is not None  # checked when the config was loaded
            return found
        raise ConfigurationError(f"stdio: set {TOKEN_ENV} or [gateway] stdio_principal to name the principal")

    def run_for(self, principal: Principal, session: str | None, meta: Mapping[str, Any] | None) -> str:
        """The run id of a request (see ``_gateway_runs``); raises PermissionError for a run the
        principal may not continue (the MCP handlers answer that as ``permission_denied``)."""
        found = self.runs.run_for(principal, session, meta)
        if isinstance(found, ActionError):
            raise PermissionError(found.message)
        return found

    # ------------------------------------------------------------------ the two MCP methods
    def list_tools(self, principal: Principal, run_id: str) -> types.ListToolsResult:
        """Offer the run the tools its principal may call, and list them."""
        specs = self._offer(principal, run_id)
        return types.ListToolsResult(tools=[mcp_tool(s) for s in specs])

    def _offer(self, principal: Principal, run_id: str) -> list[ToolSpec]:
        """``Runtime.offer`` (which drops tools the principal lacks a scope for, and traces why)."""
        offered = self.runtime.offer(run_id=run_id, principal=principal, disclosure=False)
        specs = []
        for definition in offered:
            spec = self.runtime.catalog.find(f"{definition['name']}@{definition['version']}")
            # the scope check again: a tool a principal may not call is never listed, whatever the offer
            if spec is not None and not isinstance(authorize(spec, principal), Rejected):
                specs.append(spec)
        return specs

    async def call_tool(
        self, principal: Principal, run_id: str, name: str, arguments: Mapping[str, Any] | None, meta: Any
    ) -> types.CallToolResult:
        """Run one ``tools/call`` through the runtime; every failure is an ``isError`` result."""
        try:
            # a client may call without listing first; a run offered before (by this process or
            # one before a restart: the offer is in the run's stored state) keeps the versions it
            # was offered, so a tool changed since is version_mismatch, never silently the new one
            if not self.runtime.run_state(run_id, principal).explicit_offer:
                self._offer(principal, run_id)
            args = dict(arguments or {})
            node = node_of(meta)
            if isinstance(node, ActionError):  # refused before anything runs: never read as none named
                failed = Observation.failure(node, call_id=f"{run_id}:{node.category}", tool=name[:200])
                return to_call_result(failed)
            obs = await self.runtime.acall(
                ToolCall(name=name, arguments=args), run_id=run_id, node_id=node, principal=principal
            )
        except Exception as exc:  # never an exception at the client: a typed error
            error = _failure(exc, name)
            obs = Observation.failure(error, call_id=f"{run_id}:{error.category}", tool=name[:200])
        return to_call_result(obs)

    async def serve_list(
        self, principal: Principal, session: str | None, meta: Mapping[str, Any] | None
    ) -> types.ListToolsResult:
        """``tools/list`` of a session: the tools, and the run in ``_meta``; a run the principal
        may not continue is a JSON-RPC error (a listing has no error result)."""
        run_id = self.runs.run_for(principal, session, meta)
        if isinstance(run_id, ActionError):
            raise MCPError(types.INVALID_PARAMS, f"{run_id.category}: {run_id.message}")
        return self.list_tools(principal, run_id).model_copy(update={"meta": {RUN_META: run_id}})

    async def serve_call(
        self,
        principal: Principal,
        session: str | None,
        name: str,
        arguments: Mapping[str, Any] | None,
        meta: Mapping[str, Any] | None,
    ) -> types.CallToolResult:
        """``tools/call`` of a session, in its run (named in the result's ``_meta``)."""
        try:
            run_id = self.runs.run_for(principal, session, meta)
        except Exception as exc:  # the store did not answer the ownership check
            run_id = _failure(exc, name)
        if isinstance(run_id, ActionError):
            call_id = f"mcp:{run_id.category}"
            return to_call_result(Observation.failure(run_id, call_id=call_id, tool=name[:200]))
        result = await self.call_tool(principal, run_id, name, arguments, meta)
        return result.model_copy(update={"meta": {**(result.meta or {}), RUN_META: run_id}})

    # ------------------------------------------------------------------ serving
    def server(self, caller: Callable[[ServerRequestContext[Any, Any]], Principal]) -> Server[Any]:
        """The low-level MCP server; ``caller(ctx)`` names the principal of each request."""

        async def on_list_tools(
            ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
        ) -> types.ListToolsResult:
            self._remember(ctx)
            meta = dict(params.meta) if params is not None and params.meta is not None else None
            return await self.serve_list(caller(ctx), _session_of(ctx), meta)

        async def on_call_tool(
            ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
        ) -> types.CallToolResult:
            self._remember(ctx)
            meta = dict(params.meta) if params.meta is not None else None
            return await self.serve_call(caller(ctx), _session_of(ctx), params.name, params.arguments, meta)

        @contextlib.asynccontextmanager
        async def connection(_: Server[Any]) -> AsyncIterator[dict[str, Any]]:
            # entered once per connection served by ``Server.run`` (stdio, in-process clients):
            # each gets its own session key, so its own run and its own announcements
            key = f"stdio:{uuid.uuid4().hex}"
            try:
                yield {_CONNECTION_KEY: key}
            finally:
                self._listeners.pop(key, None)

        return Server(
            self.config.name,
            version="1",
            lifespan=connection,
            instructions="Tools governed by actionspace: errors carry a category and the allowed next steps "
            "in structuredContent.error; a needs_approval call runs once it is approved and called again.",
            on_list_tools=on_list_tools,
            on_call_tool=on_call_tool,
        )

    async def serve_stdio(self) -> None:
        """Serve one MCP session on this process's stdin/stdout until the client closes it."""
        from mcp.server.stdio import stdio_server

        principal = self.stdio_principal()
        async with self._announcer.serving():
            await anyio.to_thread.run_sync(self.open_upstreams)
            server = self.server(lambda ctx: principal)
            options = server.create_initialization_options(NotificationOptions(tools_changed=True))
            async with stdio_server() as (read, write):
                await server.run(read, write, options)

    def http_app(self, *, host: str | None = None) -> ASGIApp:
        """The streamable HTTP app (an ASGI app) behind :class:`HttpGuard` (tokens, sessions, origins).

        ``host``: the address it is served on (default: the config's); on a loopback address the
        SDK's DNS rebinding protection is on.
        """
        host = host or self.config.host
        if not any(p.token_sha256 for p in self.config.principals):
            raise ConfigurationError("http: configure at least one [[principals]] entry with a token")

        def caller(ctx: ServerRequestContext[Any, Any]) -> Principal:
            principal = self.principal_for_token(bearer(getattr(ctx.request, "headers", None)))
            if principal is None:  # the middleware let no such request through
                raise PermissionError("no principal for this request")
            return principal

        server = self.server(caller)
        origins = self.config.allowed_origins
        inner = server.streamable_http_app(
            streamable_http_path=self.config.path,
            host=host,
            transport_security=sdk_security(host, origins),
            session_idle_timeout=IDLE_TIMEOUT_S,
        )

        @contextlib.asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
            async with self._announcer.serving():
                await anyio.to_thread.run_sync(self.open_upstreams)
                async with server.session_manager.run():
                    yield

        inner.router.lifespan_context = lifespan
        proxies = TrustedProxies.parse(self.config.trusted_proxies)
        return HttpGuard(
            inner,
            self.principal_for_token,
            host=host,
            allowed_origins=origins,
            trusted_proxies=proxies,
            path=self.config.path,
        )

    async def serve_http(
        self,
        *,
        host: str | None = None,
        port: int | None = None,
        fd: int | None = None,
        limits: tuple[float, float] | None = None,
    ) -> None:
        """Serve streamable HTTP on ``host:port`` (default: the config's) until cancelled.

        ``fd``: serve on this inherited listening socket instead (a supervisor or a test bound it).
        ``limits``: seconds a request's head, then its body, may take to arrive (None: 10 and 60);
        a slower request is answered 408 and its connection closed. uvicorn's own reading of
        ``X-Forwarded-For`` is off (it trusts 127.0.0.1 by default, where any local process could
        name itself another client): the guard reads it, only from ``config.trusted_proxies``.
        """
        import uvicorn

        from actionspace.service.slow_clients import deadlines

        host = host or self.config.host
        config = uvicorn.Config(
            self.http_app(host=bound_host(fd, host)),
            host=host,
            port=self.config.port if port is None else port,
            fd=fd,
            log_level="warning",
            lifespan="on",
            proxy_headers=False,
            http=deadlines() if limits is None else deadlines(*limits),
        )
        await uvicorn.Server(config).serve()

    def run(
        self,
        transport: Transport = "stdio",
        *,
        host: str | None = None,
        port: int | None = None,
        fd: int | None = None,
        limits: tuple[float, float] | None = None,
    ) -> None:
        """Serve until the client (stdio) or a signal (http) ends it; then close."""
        try:
            if transport == "stdio":
                anyio.run(self.serve_stdio)
            else:
                anyio.run(lambda: self.serve_http(host=host, port=port, fd=fd, limits=limits))
        finally:
            self.close()


class _PolicyTarget:
    """What an upstream toolset registers into: the runtime, with the config's approval policy applied."""

    def __init__(self, runtime: Runtime, config: GatewayConfig) -> None:
        self._runtime = runtime
        self._config = config
        self.catalog: Catalog = runtime.catalog

    def register(self, spec: ToolSpec) -> ToolSpec:
        return self._runtime.register(self._config.approval.apply(spec))


def _session_of(ctx: ServerRequestContext[Any, Any]) -> str | None:
    headers = getattr(ctx.request, "headers", None)
    if headers is None:  # stdio or in-process: the connection's own key (see ``Gateway.server``)
        state = ctx.lifespan_context
        key = state.get(_CONNECTION_KEY) if isinstance(state, Mapping) else None
        return key if isinstance(key, str) else "stdio"  # a lifespan not ours: one shared session
    value = headers.get("mcp-session-id")
    return str(value) if value else None


def _failure(exc: Exception, name: str) -> ActionError:
    """A failure of the gateway itself as a typed error: ``transient`` when the store did not
    answer (ask again: the ledger keeps a repeated write to one send), else ``internal``."""
    why = f"{type(exc).__name__}: {said_safely(exc, 300)}"
    if store_unavailable(exc):
        _log.warning("gateway: tools/call %s: the store did not answer (%s)", name[:200], why)
        return ActionError.of("transient", f"the store did not answer ({why}); ask again")
    _log.exception("gateway: tools/call %s failed", name[:200])
    return ActionError.of("internal", f"the gateway failed: {why}")
