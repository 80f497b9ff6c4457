"""``actionspace gateway``: the command line of the MCP gateway (the SDK is imported only when it runs)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from actionspace._cli_tables import one_line
from actionspace.errors import ConfigurationError

__all__ = ["gateway_command"]


def gateway_command(
    config: Annotated[
        Path, typer.Option("--config", help="Gateway TOML file (tools, upstreams, principals).")
    ],
    transport: Annotated[
        str,
        typer.Option("--transport", help="stdio (one session on stdin/stdout) or http."),
    ] = "stdio",
    host: Annotated[str | None, typer.Option(help="HTTP bind address (default: the config's).")] = None,
    port: Annotated[int | None, typer.Option(help="HTTP port (default: the config's).")] = None,
    fd: Annotated[
        int | None, typer.Option(help="Serve HTTP on this inherited listening socket (supervisors, tests).")
    ] = None,
    allow_origin: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-origin",
            help="Let browser pages of this exact origin (scheme://host[:port]) call over HTTP; repeatable.",
        ),
    ] = None,
    trusted_proxy: Annotated[
        list[str] | None,
        typer.Option(
            "--trusted-proxy",
            metavar="CIDR",
            help="HTTP: a reverse proxy whose X-Forwarded-For names the client, for the limit on unknown "
            "tokens (repeatable; default: the config's, else none: the header is ignored).",
        ),
    ] = None,
    head_timeout: Annotated[
        float,
        typer.Option(
            min=0.001, metavar="SECONDS", help="HTTP: longest wait for a request's line and headers."
        ),
    ] = 10.0,
    body_timeout: Annotated[
        float,
        typer.Option(min=0.001, metavar="SECONDS", help="HTTP: longest wait for a request's whole body."),
    ] = 60.0,
) -> None:
    """Serve the configured tools over MCP, governed: scopes, validation, approvals, ledger, trace."""
    if transport not in ("stdio", "http"):
        raise typer.BadParameter("--transport must be stdio or http")
    from actionspace._extras import require

    try:
        require("mcp", "mcp", "actionspace gateway")
        from actionspace.adapters._gateway_config import load_config
        from actionspace.adapters.mcp_gateway import Gateway

        gateway = Gateway(
            load_config(config).with_origins(allow_origin or ()).with_proxies(trusted_proxy or ())
        )
    except ConfigurationError as exc:
        print(one_line(str(exc)), file=sys.stderr)
        raise typer.Exit(2) from exc
    try:
        limits = (head_timeout, body_timeout)
        gateway.run("stdio" if transport == "stdio" else "http", host=host, port=port, fd=fd, limits=limits)
    except ConfigurationError as exc:
        print(one_line(str(exc)), file=sys.stderr)
        raise typer.Exit(2) from exc
