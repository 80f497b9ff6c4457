"""A stdio server's process for the bounded transport (``_mcp_stdio``): started in a kill scope of its own,
its output drained, stopped as the protocol says (input closed, a grace period, then the whole tree
killed).

The SDK's own helpers do this (and on Windows put the process in a job object), but they are private
names of ``mcp.client.stdio``. An SDK without them used to make the adapter fall back to the SDK's
``stdio_client``, whose writer takes a request for sent once it is queued in this process: a request a
stalled server never read then ended at its call's timeout, a write ``unknown_commit``, instead of
``transient`` and unsent (``_mcp_pipe``). So the helpers are looked up here, and without them the same
steps are taken with ``anyio`` alone: whichever SDK is installed, the transport is the bounded one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final, TextIO

import anyio
from anyio.abc import Process

__all__ = ["drain_output", "environment", "start_process", "stop_process"]

_log = logging.getLogger("actionspace.mcp")

_GRACE_S: Final = 2.0
"""How long a server has to exit once its input is closed, and again after ``SIGTERM`` (the SDK's)."""
_POLL_S: Final = 0.01


def _sdk(name: str) -> Any:
    """The SDK's ``mcp.client.stdio`` helper ``name``, or None when the installed SDK has none."""
    try:
        from mcp.client import stdio
    except ImportError:  # pragma: no cover - depends on the installed SDK
        return None
    return getattr(stdio, name, None)


_SDK_START: Final = _sdk("_create_platform_compatible_process")
_SDK_DRAIN: Final = _sdk("_drain_stdout")
_SDK_STOP: Final = _sdk("_stop_server_process")
_SDK_ENV: Final = _sdk("get_default_environment")
_SDK_HELPERS: Final = None not in (_SDK_START, _SDK_DRAIN, _SDK_STOP)
"""All three or none: the SDK's stop knows the process its own start made (a job object on Windows)."""
_INHERITED: Final = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")


def environment(extra: dict[str, str] | None) -> dict[str, str]:
    """The server's environment: the few variables it is safe to inherit (the SDK's choice), and ``extra``."""
    if callable(_SDK_ENV):
        inherited: dict[str, str] = _SDK_ENV()
    else:  # a shell function's value (``() {...``) is never passed on
        inherited = {k: v for k in _INHERITED if (v := os.environ.get(k)) and not v.startswith("()")}
    return inherited | (extra or {})


async def start_process(
    command: str, args: list[str], env: dict[str, str], errlog: TextIO, cwd: str | Path | None
) -> Process:
    """Start the server; on POSIX in a session (and process group) of its own, which :func:`stop_process`
    ends as a whole."""
    if _SDK_HELPERS:
        started: Process = await _SDK_START(command=command, args=args, env=env, errlog=errlog, cwd=cwd)
        return started
    return await anyio.open_process(
        [command, *args], env=env, stderr=errlog, cwd=cwd, start_new_session=sys.platform != "win32"
    )


async def drain_output(process: Process) -> None:
    """Read the server's output to its end and drop it (shielded): a server blocked on a full output pipe
    could not see its input end and exit."""
    if _SDK_HELPERS:
        await _SDK_DRAIN(process)
        return
    assert process.stdout is not None
    with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
        while True:
            await process.stdout.receive()


async def stop_process(process: Process) -> None:
    """Close the server's input, give it :data:`_GRACE_S` to exit, then ``SIGTERM`` its process group and
    after :data:`_GRACE_S` more ``SIGKILL`` it; every wait bounded."""
    if _SDK_HELPERS:
        stop: Callable[[Process], Awaitable[None]] = _SDK_STOP
        await stop(process)
        return
    assert process.stdin is not None and process.stdout is not None
    with contextlib.suppress(Exception):
        await process.stdin.aclose()
    if not await _exited(process, _GRACE_S):
        await _end_tree(process)
        if not await _exited(process, _GRACE_S):
            _log.warning("MCP server process %d is still alive after SIGKILL; left behind", process.pid)
    with contextlib.suppress(Exception):  # a survivor may hold it open: the reader ends anyway
        await process.stdout.aclose()
    transport = getattr(getattr(process, "_process", None), "_transport", None)
    close = getattr(transport, "close", None)
    if callable(close):  # else it stays open, and warns when collected, while a descendant holds a pipe
        with contextlib.suppress(PermissionError):
            close()


async def _end_tree(process: Process) -> None:
    """``SIGTERM`` to the process group its start made, ``SIGKILL`` to what is left of it after
    :data:`_GRACE_S` (Windows: the process alone, at once)."""
    if sys.platform == "win32":  # pragma: no cover - no process groups
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        return
    group = process.pid  # the leader's pid (never getpgid: it fails once the leader is reaped)
    try:
        os.killpg(group, signal.SIGTERM)
    except ProcessLookupError:
        return
    except PermissionError:  # some members are not ours to signal: the rest still go
        pass
    with anyio.move_on_after(_GRACE_S):
        while _alive(group):
            _ = process.returncode  # reaps the leader: a zombie keeps its group alive
            await anyio.sleep(_POLL_S)
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGKILL)


def _alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


async def _exited(process: Process, within_s: float) -> bool:
    """Whether the process exited within ``within_s`` (by its return code: ``wait`` also waits for its
    pipes to close, which a descendant holding them never lets happen)."""
    with anyio.move_on_after(within_s):
        while process.returncode is None:
            await anyio.sleep(_POLL_S)
    return process.returncode is not None
