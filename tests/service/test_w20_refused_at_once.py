"""A connection over ``serve``'s cap is answered its 503 at once, before it sends anything.

Its answer does not depend on its request, so the server need not hold the socket waiting for a
head: it writes the typed 503 as the connection is made and half-closes it. What the client sends
after is read and dropped, so closing never resets a connection whose answer is still unread.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

from tests.service.test_w18_real_serve import _serve
from tests.service.test_w19_connection_cap import HEALTH, _answer


def _held(port: int, n: int) -> list[socket.socket]:
    """``n`` connections in service: each began a head and waits (the cap counts them)."""
    held = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(n)]
    for sock in held:
        sock.sendall(b"GET /api/health HTTP/1.1\r\n")
    return held


def _refused(status: int, headers: dict[str, str], body: bytes) -> None:
    assert status == 503, body
    assert json.loads(body)["error"]["category"] == "transient"
    assert headers["retry-after"] == "1" and headers["connection"] == "close"
    assert headers["content-type"] == "application/json"


def test_a_connection_over_the_cap_is_answered_before_it_sends_a_head(tmp_path: Path) -> None:
    with _serve(tmp_path, "--max-connections", "2", "--head-timeout", "120") as port:
        held = _held(port, 2)
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=30) as silent:
                _refused(*_answer(silent))  # nothing sent: the answer comes all the same
                assert silent.recv(1) == b""  # and the server's side is closed after it
            with socket.create_connection(("127.0.0.1", port), timeout=30) as late:
                answer = _answer(late)
                late.sendall(HEALTH)  # its request after the answer: read and dropped, no second answer
                _refused(*answer)
                assert late.recv(1) == b""
            with socket.create_connection(("127.0.0.1", port), timeout=30) as eager:
                # a request sent at once, head and a large body, is drained: the answer is not reset away
                body = b"x" * 200_000
                head = f"POST /api/runs HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n"
                eager.sendall(head.encode() + body)
                _refused(*_answer(eager))
            for sock in held:  # the connections within the cap are served as ever
                sock.sendall(b"Host: x\r\n\r\n")
                assert _answer(sock)[0] == 200
        finally:
            for sock in held:
                sock.close()
