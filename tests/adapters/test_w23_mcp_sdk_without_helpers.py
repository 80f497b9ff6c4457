"""The stdio transport under an SDK without the private process helpers of ``mcp.client.stdio``
(``_create_platform_compatible_process``, ``_drain_stdout``, ``_stop_server_process``), run in a child
process whose SDK module has them hidden:

* a write never handed to a stalled server's pipe still ends ``transient``, unsent, and never reaches
  the server: the transport is the bounded one, not the SDK's ``stdio_client`` (which takes a request
  for sent once it is queued, so the write ended at its timeout ``unknown_commit``);
* a server that ignores the end of its input and ``SIGTERM`` is still killed, with its process group,
  when the runtime closes, within the grace periods.
"""

from __future__ import annotations

from pathlib import Path

from tests.proc import run_child

HIDE = """
import sys, types
import mcp.client
import mcp.client.stdio as sdk
hidden = types.ModuleType(sdk.__name__)
hidden.__dict__.update({k: v for k, v in vars(sdk).items() if not k.startswith("_") or k.startswith("__")})
sys.modules[sdk.__name__] = hidden
mcp.client.stdio = hidden
try:
    from mcp.client.stdio import _drain_stdout  # noqa: F401
except ImportError:
    pass
else:
    raise AssertionError("the helpers are not hidden")
"""

STALLED = (
    HIDE
    + """
import json, time
from pathlib import Path
from actionspace import Runtime
from tests.adapters.test_w22_mcp_stdio_stalls import Notes, call, connect, fill_the_pipe, states, wait_for

notes = Notes(Path(sys.argv[1]))
rt = Runtime("memory://", recover_on_start=False)
try:
    toolset = connect(rt, notes, None)
    up = call(rt, "echo", text="up")[0]
    big, _ = fill_the_pipe(rt, notes, "echo")
    began = time.monotonic()
    held, run = call(rt, "note", text="held")
    took = time.monotonic() - began
    notes.resume()
    big.join(180)
    back = wait_for(lambda: call(rt, "echo", text="back")[0].status == "ok")
finally:
    notes.resume()
    rt.close()
print(json.dumps({
    "up": up.status,
    "category": held.error.category if held.error else None,
    "message": held.error.message if held.error else "",
    "states": states(rt, run),
    "took": took,
    "back": back,
    "held_noted": notes.lines("call note held"),
}))
"""
)

STUBBORN = (
    HIDE
    + """
import json, os, time
from actionspace import Runtime
from tests.adapters.test_w56_mcp_start_and_shutdown import hostile_stdio, program_children

rt = Runtime("memory://", recover_on_start=False)
rt.add_mcp_server(hostile_stdio("hang_shutdown", allowlisted=True))
obs = rt.call({"name": "sleep", "arguments": {"seconds": 0}}, run_id=rt.new_run())
ok = obs.status if obs.error is None else repr(obs.error)
before = program_children()
began = time.monotonic()
rt.close()
took = time.monotonic() - began
print(json.dumps({"ok": ok, "before": len(before), "after": program_children(), "took": took}))
"""
)


def test_a_write_never_handed_to_a_stalled_server_is_unsent_without_the_sdks_helpers(tmp_path: Path) -> None:
    got = run_child(STALLED, str(tmp_path / "notes.txt"), deadline_s=600)
    assert got["up"] == "ok", got
    assert got["category"] == "transient", got
    assert "nothing was sent" in got["message"], got
    assert "unknown_commit" not in got["states"], got
    assert got["took"] < 60, got  # its timeout is 4 s: refused on its own, not at the test's bound
    assert got["back"], got
    assert got["held_noted"] == [], got  # never reached the server


def test_a_server_ignoring_its_input_end_and_sigterm_is_killed_without_the_sdks_helpers() -> None:
    got = run_child(STUBBORN, deadline_s=600)
    assert got["ok"] == "ok", got
    assert got["before"] == 1, got
    assert got["after"] == [], got  # killed and reaped: no process, no zombie
    assert got["took"] < 30, got  # 2 s after its input ends, 2 s after SIGTERM, then SIGKILL


def test_the_subscription_key_the_reader_keeps_is_the_sdks() -> None:
    from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY

    from actionspace.adapters import _mcp_stdio

    assert _mcp_stdio._SUBSCRIPTION_ID == SUBSCRIPTION_ID_META_KEY
