"""What the MCP client read of the answers of an HTTP server, counted where the client already reads
them, so a test holds the cost of a huge answer by what the client did, never by wall time.

* ``read_bytes``: the bytes of every response body the client read before closing it (httpx's
  ``num_bytes_downloaded``, counted when the response is closed), ``most_bytes`` the most of one;
* ``parses`` / ``parsed_bytes``: the JSON-RPC messages the transport parsed
  (``_mcp_http.jsonrpc_message_adapter.validate_json``) and their bytes.
"""

from __future__ import annotations

from typing import Any

import httpx2
import mcp_types
import pytest

from actionspace.adapters import _mcp_http
from tests.adapters.mcp_work import _CountingAdapter

PIECE_SLACK = 1 << 20
"""What the client may read past a bound before it knows the bound is passed: one network read."""


class HttpReadWork:
    """The counters above, since :meth:`reset`; installed for the test that makes one."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reset()
        close = httpx2.Response.aclose
        work = self

        async def counted(response: httpx2.Response) -> None:
            if not response.is_closed:
                read = response.num_bytes_downloaded
                work.read_bytes += read
                work.most_bytes = max(work.most_bytes, read)
            await close(response)

        monkeypatch.setattr(httpx2.Response, "aclose", counted)
        adapter: Any = _CountingAdapter(mcp_types.jsonrpc_message_adapter, self)  # type: ignore[arg-type]
        monkeypatch.setattr(_mcp_http, "jsonrpc_message_adapter", adapter)

    def reset(self) -> None:
        self.read_bytes = self.most_bytes = self.parses = self.parsed_bytes = 0

    def assert_stopped_at(self, bound: int) -> None:
        """No answer was read (nor any of it parsed) past ``bound`` and one network read."""
        assert self.most_bytes <= bound + PIECE_SLACK, (self.most_bytes, bound)
        assert self.parsed_bytes <= PIECE_SLACK, self.parsed_bytes  # the answer refused was never parsed
