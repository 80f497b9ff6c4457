"""The MCP gateway's configuration: one TOML file, read once, checked before anything is served.

The file has four kinds of table (every key is optional unless said otherwise; an unknown key is
an error, so a typo never silently turns a safety setting off)::

    [gateway]
    name = "acme-tools"            # server name reported to MCP clients (default "actionspace")
    store = "sqlite:///gw.db"      # ledger, approvals, trace; relative to this file
                                   # (default: ACTIONSPACE_STORE or ~/.actionspace)
    stdio_principal = "alice"      # who stdio sessions act for when ACTIONSPACE_GATEWAY_TOKEN is unset
    host = "127.0.0.1"             # HTTP bind address (default 127.0.0.1)
    port = 8765                    # HTTP port (default 8765)
    path = "/mcp"                  # HTTP endpoint (default /mcp)
    pythonpath = ["."]             # folders put on sys.path before importing tools (relative to the file)
    allowed_origins = ["https://console.example.com"]   # browser origins let in besides the gateway's own
                                   # (exact scheme://host[:port]; no wildcards, never "null")
    trusted_proxies = ["10.0.0.0/8"]  # reverse proxies whose X-Forwarded-For names the client, for
                                   # the limit on unknown tokens (default none: the header is ignored)

    [approval]                     # which calls wait for a human decision
    effects = ["external"]         # every tool with one of these effects
    risks = ["high"]               # every tool of one of these risks
    tools = ["delete_repo"]        # these tools by name

    [[tools]]                      # Python tools, by import path
    import = "acme.tools:registry" # a ToolSpec, an @tool function, or a list / dict of them

    [[upstreams]]                  # MCP servers whose tools the gateway governs and re-serves
    name = "time"                  # required; also the default tool-name prefix ("time_")
    command = ["mcp-server-time"]  # stdio server ... or: url = "http://host/mcp"
    allowlisted = true             # trust its annotations (default false: treated as untrusted)
    reconnect = { attempts = 5, initial_backoff_s = 0.5, cooldown_s = 60 }
                                   # how a server that went away is connected to again (default: the
                                   # defaults of ``Reconnect``; any of its fields; ``false``: never)

    [[principals]]                 # who may connect, and what each may call
    id = "alice"                   # required
    token_env = "ALICE_TOKEN"      # the API token, read from this environment variable ... or: token = "..."
    scopes = ["read:*", "write:create_event"]
"""

from __future__ import annotations

import hashlib
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final, get_args
from urllib.parse import urlsplit

from actionspace._store_url import sqlite_path, sqlite_url
from actionspace.adapters._mcp_reconnect_policy import DEFAULT_RECONNECT, Reconnect
from actionspace.catalog.spec import Effect, Risk, ToolSpec
from actionspace.errors import ConfigurationError
from actionspace.policy.principal import Principal

__all__ = [
    "ApprovalPolicy",
    "GatewayConfig",
    "PrincipalConfig",
    "UpstreamConfig",
    "exact_origin",
    "load_config",
    "token_digest",
]

_SECTIONS: Final = frozenset({"gateway", "approval", "tools", "upstreams", "principals"})
_GATEWAY_KEYS: Final = frozenset(
    {
        "name",
        "store",
        "stdio_principal",
        "host",
        "port",
        "path",
        "pythonpath",
        "allowed_origins",
        "trusted_proxies",
    }
)
_APPROVAL_KEYS: Final = frozenset({"effects", "risks", "tools"})
_TOOL_KEYS: Final = frozenset({"import"})
_UPSTREAM_KEYS: Final = frozenset(
    {"name", "command", "url", "env", "allowlisted", "prefix", "headers", "reconnect"}
)
_RECONNECT_KEYS: Final = frozenset(
    {
        "attempts",
        "initial_backoff_s",
        "backoff_multiplier",
        "max_backoff_s",
        "cooldown_s",
        "unanswered",
        "idle_probe_s",
    }
)
_PRINCIPAL_KEYS: Final = frozenset({"id", "token", "token_env", "scopes", "tenant"})


def token_digest(token: str) -> str:
    """sha256 hex of an API token: what the gateway keeps and compares, never the token itself."""
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalPolicy:
    """Which tools need a human decision before every call (on top of the tools' own rules)."""

    effects: tuple[Effect, ...] = ()
    """Tools with one of these effects need approval. Default: none."""
    risks: tuple[Risk, ...] = ()
    """Tools of one of these risks need approval. Default: none."""
    tools: tuple[str, ...] = ()
    """Tools with one of these names (as served, prefix included) need approval. Default: none."""

    def applies(self, spec: ToolSpec) -> bool:
        """True when this policy makes ``spec`` require approval."""
        return spec.effect in self.effects or spec.risk in self.risks or spec.name in self.tools

    def apply(self, spec: ToolSpec) -> ToolSpec:
        """``spec``, marked ``requires_approval`` when the policy applies to it."""
        if spec.requires_approval or not self.applies(spec):
            return spec
        return spec.evolve(requires_approval=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class UpstreamConfig:
    """An MCP server whose tools the gateway wraps, governs and serves again."""

    name: str
    """Short name; the default prefix of its tools' names. Required."""
    command: tuple[str, ...] = ()
    """Program and arguments of a stdio server (exactly one of ``command`` and ``url``)."""
    url: str | None = None
    """Endpoint of a streamable HTTP server."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Extra environment variables for a stdio server."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """Extra HTTP headers for an HTTP server (for example its own Authorization)."""
    allowlisted: bool = False
    """Trust the server's annotations (read-only, destructive). Default False: untrusted."""
    prefix: str | None = None
    """Prefix of the served tool names. Default ``"<name>_"``; ``""`` keeps the names as they are."""
    reconnect: Reconnect | None = DEFAULT_RECONNECT
    """How a session that ended on its own is opened again (``Reconnect``'s defaults unless the file's
    ``reconnect`` table sets some of its fields); None (``reconnect = false``): never."""

    @property
    def tool_prefix(self) -> str:
        return f"{self.name}_" if self.prefix is None else self.prefix


@dataclass(frozen=True, slots=True, kw_only=True)
class PrincipalConfig:
    """A principal that may connect, with the digest of its API token."""

    principal: Principal
    token_sha256: str | None = field(default=None, repr=False)
    """sha256 hex of the token; None: the principal has no token (stdio only, by id)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GatewayConfig:
    """Everything ``actionspace gateway`` serves and how; see the module docstring for the file."""

    name: str = "actionspace"
    """Server name reported to MCP clients. Default ``"actionspace"``."""
    store: str | None = None
    """Store URL for ledger, approvals and trace. Default: ``ACTIONSPACE_STORE`` or ``~/.actionspace``."""
    stdio_principal: str | None = None
    """Principal id of stdio sessions when ``ACTIONSPACE_GATEWAY_TOKEN`` is unset. Default: none."""
    host: str = "127.0.0.1"
    """HTTP bind address. Default ``127.0.0.1``."""
    port: int = 8765
    """HTTP port. Default 8765."""
    path: str = "/mcp"
    """HTTP endpoint path. Default ``/mcp``."""
    pythonpath: tuple[Path, ...] = ()
    """Folders put on ``sys.path`` before tools are imported."""
    tools: tuple[str, ...] = ()
    """Import paths of Python tools (``module:attribute``)."""
    upstreams: tuple[UpstreamConfig, ...] = ()
    principals: tuple[PrincipalConfig, ...] = ()
    approval: ApprovalPolicy = field(default_factory=ApprovalPolicy)
    allowed_origins: tuple[str, ...] = ()
    """Browser origins (exact ``scheme://host[:port]``, see :func:`exact_origin`) let through over
    HTTP besides the gateway's own. Default: none."""
    trusted_proxies: tuple[str, ...] = ()
    """Reverse proxies (addresses or CIDR networks) whose ``X-Forwarded-For`` names the client whose
    unknown tokens are counted. Default: none (the header is ignored)."""

    def with_proxies(self, cidrs: Sequence[str]) -> GatewayConfig:
        """This config trusting ``cidrs`` too; raises ConfigurationError for one that is no network."""
        return replace(self, trusted_proxies=_proxies([*self.trusted_proxies, *cidrs]))

    def with_origins(self, origins: Sequence[str]) -> GatewayConfig:
        """This config with ``origins`` allowed too; raises ConfigurationError for one that is not exact."""
        added = tuple(_origin(o, "--allow-origin") for o in origins)
        return replace(self, allowed_origins=tuple(dict.fromkeys(self.allowed_origins + added)))

    def principal_by_token(self, token: str) -> Principal | None:
        """The principal holding ``token``, or None."""
        digest = token_digest(token)
        for entry in self.principals:
            if entry.token_sha256 is not None and entry.token_sha256 == digest:
                return entry.principal
        return None

    def principal_by_id(self, principal_id: str) -> Principal | None:
        for entry in self.principals:
            if entry.principal.id == principal_id:
                return entry.principal
        return None


def load_config(path: str | Path, *, environ: Mapping[str, str] | None = None) -> GatewayConfig:
    """Read and check a gateway TOML file; raises ConfigurationError naming what is wrong.

    ``environ`` (default ``os.environ``) supplies the tokens named by ``token_env``.
    """
    file = Path(path)
    try:
        raw = tomllib.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigurationError(f"gateway config {file}: {exc}") from exc
    return parse_config(raw, base=file.parent, environ=os.environ if environ is None else environ)


def parse_config(raw: Mapping[str, Any], *, base: Path, environ: Mapping[str, str]) -> GatewayConfig:
    """Build a GatewayConfig from parsed TOML (``base``: folder relative paths start from)."""
    _only(raw, _SECTIONS, "the file")
    gateway = _table(raw, "gateway")
    _only(gateway, _GATEWAY_KEYS, "[gateway]")
    approval = _table(raw, "approval")
    _only(approval, _APPROVAL_KEYS, "[approval]")
    principals = tuple(_principal(p, environ) for p in _tables(raw, "principals"))
    ids = [p.principal.id for p in principals]
    if len(set(ids)) != len(ids):
        raise ConfigurationError("[[principals]]: every id must be unique")
    stdio_principal = _opt_str(gateway, "stdio_principal", "[gateway]")
    if stdio_principal is not None and stdio_principal not in ids:
        raise ConfigurationError(f"[gateway] stdio_principal {stdio_principal!r} is not a [[principals]] id")
    port = gateway.get("port", 8765)
    if not isinstance(port, int) or not 0 <= port < 65536:
        raise ConfigurationError("[gateway] port must be an integer in 0..65535")
    return GatewayConfig(
        name=_opt_str(gateway, "name", "[gateway]") or "actionspace",
        store=_store(_opt_str(gateway, "store", "[gateway]"), base),
        stdio_principal=stdio_principal,
        host=_opt_str(gateway, "host", "[gateway]") or "127.0.0.1",
        port=port,
        path=_opt_str(gateway, "path", "[gateway]") or "/mcp",
        pythonpath=tuple(base / p for p in _strings(gateway, "pythonpath", "[gateway]")),
        allowed_origins=tuple(
            dict.fromkeys(
                _origin(o, "[gateway] allowed_origins")
                for o in _strings(gateway, "allowed_origins", "[gateway]")
            )
        ),
        trusted_proxies=_proxies(_strings(gateway, "trusted_proxies", "[gateway]")),
        tools=tuple(_tool(t) for t in _tables(raw, "tools")),
        upstreams=_upstreams(_tables(raw, "upstreams")),
        principals=principals,
        approval=ApprovalPolicy(
            effects=_choices(approval, "effects", get_args(Effect)),
            risks=_choices(approval, "risks", get_args(Risk)),
            tools=_strings(approval, "tools", "[approval]"),
        ),
    )


def _proxies(cidrs: Sequence[str]) -> tuple[str, ...]:
    """``cidrs`` once each, checked as :class:`~actionspace.service.proxies.TrustedProxies` reads them."""
    from actionspace.service.proxies import TrustedProxies

    TrustedProxies.parse(cidrs)
    return tuple(dict.fromkeys(cidrs))


def exact_origin(value: str) -> str:
    """``value`` as the one origin it names, ``scheme://host[:port]`` (host lower case, the scheme's
    default port dropped); raises ValueError saying why it names no single http(s) origin.

    Refused: wildcards (they let in origins nobody named), ``null`` (the origin any sandboxed or
    ``file:`` page sends), a user, path, query or fragment, spaces and control characters.
    """
    if "*" in value:
        raise ValueError("a wildcard lets in origins nobody named: list each origin")
    if value.strip().lower() == "null":
        raise ValueError("'null' is sent by any sandboxed or file: page, so it names no one")
    if not value.isascii() or any(c.isspace() or not c.isprintable() for c in value):
        raise ValueError("an origin holds no spaces, control or non-ASCII characters")
    if "://" not in value:
        raise ValueError("an origin is scheme://host[:port]")
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"the port must be a number in 1..65535 ({exc})") from exc
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise ValueError("the scheme must be http or https")
    if "@" in parts.netloc:
        raise ValueError("an origin names no user")
    if parts.path:
        raise ValueError("an origin has no path")
    if parts.query or parts.fragment or "?" in value or "#" in value:
        raise ValueError("an origin has no query or fragment")
    if port == 0:
        raise ValueError("the port must be a number in 1..65535")
    host = parts.hostname
    if not host:
        raise ValueError("an origin names a host")
    netloc = f"[{host}]" if ":" in host else host
    if port is not None and port != (443 if scheme == "https" else 80):
        netloc += f":{port}"
    return f"{scheme}://{netloc}"


def _origin(value: str, where: str) -> str:
    try:
        return exact_origin(value)
    except ValueError as exc:
        raise ConfigurationError(f"{where}: {value!r}: {exc}") from exc


def _store(url: str | None, base: Path) -> str | None:
    """A relative ``sqlite:///`` path is taken from the config file's folder, not the working one."""
    if url is None or not url.startswith("sqlite://"):
        return url
    path = sqlite_path(url)
    if path.is_absolute():
        return url
    return sqlite_url((base / path).resolve())


def _tool(table: Mapping[str, Any]) -> str:
    _only(table, _TOOL_KEYS, "[[tools]]")
    ref = table.get("import")
    if not isinstance(ref, str) or ":" not in ref:
        raise ConfigurationError("[[tools]] import must be 'module:attribute'")
    return ref


def _upstreams(tables: Sequence[Mapping[str, Any]]) -> tuple[UpstreamConfig, ...]:
    out = []
    for table in tables:
        _only(table, _UPSTREAM_KEYS, "[[upstreams]]")
        name = table.get("name")
        if not isinstance(name, str) or not name:
            raise ConfigurationError("[[upstreams]] needs a name")
        where = f"[[upstreams]] {name}"
        command = _strings(table, "command", where)
        url = _opt_str(table, "url", where)
        if bool(command) == (url is not None):
            raise ConfigurationError(f"{where}: give exactly one of command and url")
        allowlisted = table.get("allowlisted", False)
        if not isinstance(allowlisted, bool):
            raise ConfigurationError(f"{where}: allowlisted must be true or false")
        out.append(
            UpstreamConfig(
                name=name,
                command=command,
                url=url,
                env=_string_map(table, "env", where),
                headers=_string_map(table, "headers", where),
                allowlisted=allowlisted,
                prefix=_opt_str(table, "prefix", where),
                reconnect=_reconnect(table, where),
            )
        )
    names = [u.name for u in out]
    if len(set(names)) != len(names):
        raise ConfigurationError("[[upstreams]]: every name must be unique")
    return tuple(out)


def _reconnect(table: Mapping[str, Any], where: str) -> Reconnect | None:
    """An upstream's ``reconnect``: ``true`` (the default policy), ``false`` (never) or a table of the
    fields of :class:`Reconnect` (``cooldown_s = inf``: no new round once the attempts are spent)."""
    value = table.get("reconnect", True)
    if value is True:
        return DEFAULT_RECONNECT
    if value is False:
        return None
    if not isinstance(value, Mapping):
        raise ConfigurationError(
            f"{where}: reconnect must be true, false or a table of {sorted(_RECONNECT_KEYS)}"
        )
    _only(value, _RECONNECT_KEYS, f"{where} reconnect")
    try:
        return Reconnect(**value)
    except ConfigurationError as exc:
        raise ConfigurationError(f"{where}: {exc}") from exc


def _principal(table: Mapping[str, Any], environ: Mapping[str, str]) -> PrincipalConfig:
    _only(table, _PRINCIPAL_KEYS, "[[principals]]")
    pid = table.get("id")
    if not isinstance(pid, str) or not pid:
        raise ConfigurationError("[[principals]] needs an id")
    where = f"[[principals]] {pid}"
    token = _opt_str(table, "token", where)
    token_env = _opt_str(table, "token_env", where)
    if token is not None and token_env is not None:
        raise ConfigurationError(f"{where}: give token or token_env, not both")
    if token_env is not None:
        token = environ.get(token_env)
        if not token:
            raise ConfigurationError(f"{where}: environment variable {token_env} is unset or empty")
    if token is not None and len(token) < 16:
        raise ConfigurationError(f"{where}: a token must have at least 16 characters")
    scopes = _strings(table, "scopes", where)
    principal = Principal(id=pid, scopes=scopes, tenant=_opt_str(table, "tenant", where))
    return PrincipalConfig(principal=principal, token_sha256=None if token is None else token_digest(token))


def _only(table: Mapping[str, Any], allowed: frozenset[str], where: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise ConfigurationError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {sorted(allowed)}")


def _table(raw: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = raw.get(name, {})
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"[{name}] must be a table")
    return value


def _tables(raw: Mapping[str, Any], name: str) -> list[Mapping[str, Any]]:
    value = raw.get(name, [])
    if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
        raise ConfigurationError(f"[[{name}]] must be an array of tables")
    return value


def _opt_str(table: Mapping[str, Any], key: str, where: str) -> str | None:
    value = table.get(key)
    if value is not None and not isinstance(value, str):
        raise ConfigurationError(f"{where}: {key} must be a string")
    return value


def _strings(table: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigurationError(f"{where}: {key} must be a list of strings")
    return tuple(value)


def _string_map(table: Mapping[str, Any], key: str, where: str) -> dict[str, str]:
    value = table.get(key, {})
    if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
        raise ConfigurationError(f"{where}: {key} must be a table of strings")
    return dict(value)


def _choices(table: Mapping[str, Any], key: str, allowed: tuple[Any, ...]) -> tuple[Any, ...]:
    values = _strings(table, key, "[approval]")
    bad = [v for v in values if v not in allowed]
    if bad:
        raise ConfigurationError(f"[approval] {key}: {bad} not among {list(allowed)}")
    return values
