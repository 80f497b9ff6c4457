"""A client still writing when the server answers 408 and ends the connection reads that answer:
the server reads and drops what comes after it instead of closing with unread bytes (which resets
the connection and throws away the answer not yet sent)."""

from __future__ import annotations

import socket
import threading
import time

from tests.service.test_w79_slow_clients import _server


def test_a_client_writing_its_body_as_fast_as_it_can_past_the_deadline_reads_the_408() -> None:
    with _server(body_timeout_s=0.5) as (_base, port):
        sock = socket.create_connection(("127.0.0.1", port))
        stop = threading.Event()

        def write_on() -> None:  # a body too slow for its deadline, sent without looking at the answer
            chunk = b" " * 4096
            try:
                while not stop.is_set():
                    sock.sendall(chunk)
                    time.sleep(0.001)
            except OSError:
                pass

        with sock:
            sock.sendall(
                b"POST /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Authorization: Bearer agent-token\r\nContent-Length: 16000000\r\n\r\n{"
            )
            writer = threading.Thread(target=write_on, daemon=True)
            writer.start()
            sock.settimeout(5)
            answer = b""
            try:
                while not answer.endswith(b"}") and (chunk := sock.recv(65536)):
                    answer += chunk
            except (ConnectionResetError, TimeoutError) as exc:  # closed with the body unread
                answer += repr(exc).encode()
            stop.set()
            writer.join(5)
        assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
        assert b"did not arrive" in answer
