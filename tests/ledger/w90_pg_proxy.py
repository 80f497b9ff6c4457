"""A TCP proxy in front of the test cluster's unix socket that cuts the network at a chosen moment.

``Proxy(pg_url)`` listens on 127.0.0.1 and forwards every byte until armed:

* ``"commit_answer"``: the next ``COMMIT`` reaches the server, which commits; its answer is dropped
  and both sides are closed (the transaction landed, its client never hears so);
* ``"commit_dropped"``: the next ``COMMIT`` is dropped and both sides are closed (nothing landed);
* ``"blackhole"``: from now on nothing is forwarded either way and nothing is closed (a network cut
  with no goodbye: only a statement's missing answer shows it).

* ``"commit_cut_landed"``: the next ``COMMIT`` reaches the server, then the network is cut: nothing
  more is forwarded, on any connection, and nothing is closed (the server's session lives on);
* ``"commit_cut_dropped"``: the same, the ``COMMIT`` itself swallowed (the server's session waits
  inside its transaction).

The first two act once, then forward again; ``blackhole`` lasts until :meth:`close`. After a cut,
:meth:`restore` lets new connections through (those the cut caught, or that were opened while it
lasted, stay dead: their bytes were lost).
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from urllib.parse import quote

import psycopg

__all__ = ["Proxy"]


class Proxy:
    def __init__(self, pg_url: str) -> None:
        info = psycopg.conninfo.conninfo_to_dict(pg_url)
        self._target = f"{info['host']}/.s.PGSQL.{info.get('port') or 5432}"
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.url = pg_url.replace(
            f"host={quote(str(info['host']), safe='')}", f"host=127.0.0.1&port={self.port}"
        )
        assert self.url != pg_url
        self.mode = "pass"
        self._skip = 0
        self._marker = b"COMMIT"
        self.acted: list[str] = []
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        self._closed = False
        self._cut = False
        self._dead: set[int] = set()
        self._pumps = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def arm(self, mode: str, *, skip: int = 0, marker: bytes = b"COMMIT") -> None:
        """Act as ``mode`` says at the ``COMMIT`` after the next ``skip`` ones (forwarded); the
        ``commit_cut_*`` modes at the statement holding ``marker`` instead, when given."""
        with self._lock:
            self.mode, self._skip, self._marker = mode, skip, marker

    def restore(self) -> None:
        """The network is back for connections opened from now on."""
        with self._lock:
            self._cut = False

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.socket(socket.AF_UNIX)
            server.connect(self._target)
            with self._lock:
                self._socks += [client, server]
                self._pumps += 1
                pump = self._pumps
                if self._cut:
                    self._dead.add(pump)
            threading.Thread(target=self._pump, args=(client, server, pump), daemon=True).start()

    def _take(self, mode: str) -> bool:
        with self._lock:
            if self.mode != mode:
                return False
            if self._skip:
                self._skip -= 1
                return False
            self.mode = "pass"
            self.acted.append(mode)
            return True

    def _cut_all(self) -> None:
        with self._lock:
            self._cut = True
            self._dead.update(range(1, self._pumps + 1))

    def _pump(self, client: socket.socket, server: socket.socket, pump: int = 0) -> None:
        awaiting_commit = False
        try:
            while True:
                ready, _, _ = select.select([client, server], [], [], 0.05)
                for sock in ready:
                    data = sock.recv(65536)
                    if pump in self._dead:
                        if not data:
                            return  # a cut network carries no goodbye: the other side waits on
                        continue
                    if not data:
                        raise OSError("closed")
                    if sock is client and self._marker in data:
                        if self._take("commit_cut_dropped"):
                            self._cut_all()
                            continue
                        if self._take("commit_cut_landed"):
                            server.sendall(data)
                            self._cut_all()
                            continue
                    if self.mode == "blackhole":
                        continue  # taken and never forwarded: TCP itself sees nothing wrong
                    if sock is client:
                        if b"COMMIT" in data and self._take("commit_dropped"):
                            raise OSError("cut")
                        if b"COMMIT" in data and self._take("commit_answer"):
                            awaiting_commit = True
                        server.sendall(data)
                    else:
                        if awaiting_commit and b"COMMIT\x00" in data:
                            raise OSError("cut")  # committed; the answer is dropped
                        client.sendall(data)
        except OSError:
            for sock in (client, server):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def close(self) -> None:
        self._listener.close()
        with self._lock:
            socks, self._socks = self._socks, []
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
