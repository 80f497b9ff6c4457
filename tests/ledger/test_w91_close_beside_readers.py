"""Closing a SQLite store while other threads read through it does not crash the process.

A reading connection belongs to its thread; ``close()`` closed them all from the closing thread,
so a connection running a statement on another thread (a tool's thread writing its late outcome
after a timeout, a trace reader) had it freed underneath it: a segmentation fault of the whole
process (``Runtime.close()`` after a timed-out call that then ended). Now such a connection is
left to its thread, which is told the store is closed (``ValueError``) on its next statement and
closes it then. Each case runs in its own process, since the failure is the process dying.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

_SCRIPT = textwrap.dedent(
    """
    import os, sys, threading, time
    from actionspace.ledger.sqlite import SqliteLedgerStore
    from actionspace.trace.sqlite import SqliteTraceStore

    kind, folder, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    closed_seen = 0
    for n in range(rounds):
        path = os.path.join(folder, f"{kind}{n}.db")
        if kind == "ledger":
            store = SqliteLedgerStore(path)
            read = lambda: store.get("k")
        else:
            store = SqliteTraceStore(path)
            read = lambda: store.events("r")
        ready = threading.Barrier(5)
        told = []

        def reader():
            ready.wait()
            try:
                while True:
                    read()
            except ValueError:
                told.append(1)  # the store said it is closed

        threads = [threading.Thread(target=reader) for _ in range(4)]
        for t in threads:
            t.start()
        ready.wait()
        time.sleep(0.001)
        store.close()
        for t in threads:
            t.join(10)
        assert not any(t.is_alive() for t in threads)
        closed_seen += len(told)
    print("told", closed_seen)
    """
)


@pytest.mark.parametrize("kind", ["ledger", "trace"])
def test_closing_a_store_while_threads_read_through_it_tells_them_and_does_not_crash(
    kind: str, tmp_path: Path
) -> None:
    rounds = 120
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, kind, str(tmp_path), str(rounds)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["told", str(rounds * 4)]  # every reader was told, none crashed
