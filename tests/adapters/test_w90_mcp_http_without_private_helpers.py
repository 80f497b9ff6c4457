"""The HTTP transport under an SDK without its private ``mcp.shared._httpx_utils``, in a child process
whose SDK has it hidden (its own modules, imported first, keep what they took from it, as a release
built without it would have its own):

* the client opens its session and calls as before, and every guarantee holds: a 40 MB answer ends
  ``result_too_large`` unread, a redirect to another origin is never followed (``redirect_refused``),
  an answer that never ends is given up at its deadline and its connection dropped, the closing DELETE
  is sent; before, ``actionspace.adapters.mcp_client`` could not be imported at all;
* with an SDK lacking what the bounded transport itself builds on, an HTTP server is refused when it
  is added, naming why, and nothing is sent to it; before, the SDK's own transport was used, which
  reads a 40 MB answer whole and takes it;
* which redirect is followed is decided as the SDK's helper did, on every pair of URLs tried.
"""

from __future__ import annotations

from pathlib import Path

import httpx2
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.adapters._mcp_redirects import within_origin
from tests.proc import run_child

HIDE = """
import importlib.abc, sys
import mcp, mcp.client.sse, mcp.client.streamable_http, mcp.client.auth, mcp.shared  # take it first
HIDDEN = sys.argv[2]
class Hidden(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == HIDDEN:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.modules.pop(HIDDEN)
delattr(sys.modules[HIDDEN.rpartition(".")[0]], HIDDEN.rpartition(".")[2])
sys.meta_path.insert(0, Hidden())
try:
    __import__(HIDDEN)
except ImportError:
    pass
else:
    raise AssertionError("the module is not hidden")
"""

CALLS = (
    HIDE
    + """
import json, time
from pathlib import Path
from tests.adapters.test_w90_mcp_http_misbehaving_servers import Raw, failed

server = Raw(Path(sys.argv[1]), "keep")
out = {}
try:
    for tool in ("ok", "ok_write", "huge_json", "cross_origin_write", "endless_comments_write"):
        took, obs = server.call(tool)
        out[tool] = [obs.data if obs.error is None else list(failed(obs)), took]
    out["closed"] = server.closed("endless_comments_write")
finally:
    server.close()
out["lines"] = server.lines()
out["hidden"] = HIDDEN in sys.modules
print(json.dumps(out))
"""
)

REFUSED = (
    HIDE
    + """
import json
from pathlib import Path
from tests.adapters.test_w90_mcp_http_misbehaving_servers import Raw

try:
    server = Raw(Path(sys.argv[1]), "keep")
except Exception as exc:
    out = {"refused": type(exc).__name__, "said": str(exc)}
else:
    took, obs = server.call("huge_json")
    out = {"refused": None, "huge_json": obs.status if obs.error is None else obs.error.to_dict()}
    server.close()
out["lines"] = (Path(sys.argv[1]) / "notes-keep.txt").read_text().splitlines()
print(json.dumps(out))
"""
)


def test_the_http_client_keeps_its_guarantees_without_the_sdks_private_http_helpers(tmp_path: Path) -> None:
    got = run_child(CALLS, str(tmp_path), "mcp.shared._httpx_utils", deadline_s=300)
    assert got["hidden"] is False, got  # nothing brought it back
    assert got["ok"][0] == "fine" and got["ok_write"][0] == "fine", got
    assert got["huge_json"][0] == ["permanent", "result_too_large"], got
    assert got["cross_origin_write"][0] == ["permanent", "redirect_refused"], got
    assert got["endless_comments_write"][0] == ["unknown_commit", ""], got
    assert got["endless_comments_write"][1] < 10, got
    assert got["closed"], got  # its connection was dropped: nothing reads on
    posts = [line for line in got["lines"] if line.startswith("POST")]
    assert [line for line in posts if "cross_origin_write" in line] == ["POST s1 cross_origin_write"], got
    assert "DELETE s1 -" in got["lines"], got  # the session was ended


def test_an_sdk_lacking_what_the_bounded_transport_needs_refuses_http_servers_not_its_guarantees(
    tmp_path: Path,
) -> None:
    got = run_child(REFUSED, str(tmp_path), "mcp.shared._context_streams", deadline_s=300)
    assert got["refused"] == "ConfigurationError", got  # the SDK's own transport took a 40 MB answer whole
    assert "BoundedTransportMissing" in got["said"] and "_context_streams" in got["said"], got
    assert not any(line.startswith("POST") for line in got["lines"]), got  # nothing was sent


_URLS = st.builds(
    "{}://{}{}{}/mcp".format,
    st.sampled_from(["http", "https", "ftp"]),
    st.sampled_from(["", "user:pw@", "other:pw@"]),
    st.sampled_from(["example.com", "EXAMPLE.com", "example.org", "127.0.0.1", "[::1]"]),
    st.sampled_from(["", ":80", ":443", ":8080"]),
)


@settings(max_examples=300, deadline=None)
@given(
    sent=_URLS, goes=_URLS, method=st.sampled_from(["POST", "GET"]), other=st.sampled_from(["POST", "GET"])
)
def test_which_redirect_is_followed_is_what_the_sdks_helper_decided(
    sent: str, goes: str, method: str, other: str
) -> None:
    """Where the SDK still has its helper, the client's own rule agrees with it on every pair of URLs."""
    from mcp.shared._httpx_utils import next_request_within_origin

    request, following = httpx2.Request(method, sent), httpx2.Request(other, goes)
    response = httpx2.Response(307, request=request)
    response.next_request = following
    assert within_origin(request, following) == (next_request_within_origin(response) is not None)
