"""What the counted statement of a SQLite store's reading connection costs a read, A/B in one process.

    python scripts/read_guard_ab.py            # SqliteLedgerStore.get of a stored entry
    python scripts/read_guard_ab.py missing    # the same get of a key with no entry (the statement alone)
    valgrind --tool=callgrind python scripts/read_guard_ab.py counted 2000 get   # then 6000, then plain:
    # instructions per call = difference of the two totals / 4000 (start-up and set-up cancel)

The same file is read by two ledger stores: one as the stores read now (this thread's connection a
``_connections.Reader``: the statement counted, its rows read before ``execute`` returns), the
other given a plain ``sqlite3`` connection for this thread (the read before the count). Blocks of
calls alternate between them; each block's thread CPU time per call is kept (a loaded machine's
preemption is left out), and the medians and how many blocks the counted read was lower are printed.
"""

from __future__ import annotations

import sqlite3
import statistics
import sys
import tempfile
import time

from actionspace import Runtime
from actionspace.ledger.sqlite import SqliteLedgerStore

BLOCKS, PER_BLOCK = 40, 2500


def stores(which: str) -> tuple[SqliteLedgerStore, SqliteLedgerStore, str]:
    """The counted store, the plain one and the key ``which`` reads, on a new file."""
    path = f"{tempfile.mkdtemp()}/ab.db"
    rt = Runtime(f"sqlite:///{path}", recover_on_start=False)

    @rt.tool(effect="external", idempotency="none")
    def send(to: str) -> str:
        """Send something."""
        return to

    rt.call({"name": "send", "arguments": {"to": "bob"}}, run_id="r", node_id="n")
    stored = rt.ledger.get_node("r", "n")
    assert stored is not None
    rt.close()
    counted, plain = SqliteLedgerStore(path), SqliteLedgerStore(path)
    plain._db._local.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    key = stored.key if which == "get" else "missing"
    assert counted.get(key) == plain.get(key)
    return counted, plain, key


def main(which: str) -> None:
    counted, plain, key = stores(which)
    times: dict[str, list[float]] = {"plain": [], "counted": []}
    for block in range(BLOCKS):
        for name in ("plain", "counted") if block % 2 == 0 else ("counted", "plain"):
            get = (plain if name == "plain" else counted).get
            start = time.thread_time()
            for _ in range(PER_BLOCK):
                get(key)
            times[name].append((time.thread_time() - start) / PER_BLOCK * 1e6)
    before, after = statistics.median(times["plain"]), statistics.median(times["counted"])
    lower = sum(c < p for p, c in zip(times["plain"], times["counted"], strict=True))
    print(
        f"{which}: {BLOCKS} blocks of {PER_BLOCK} calls each way; median plain {before:.2f} us,"
        f" counted {after:.2f} us ({after / before:.3f} x); counted lower in {lower}/{BLOCKS} blocks"
    )


def once(variant: str, calls: int, which: str) -> None:
    """``calls`` gets through one variant only (for an instruction count)."""
    counted, plain, key = stores(which)
    get = (plain if variant == "plain" else counted).get
    for _ in range(calls):
        get(key)


if __name__ == "__main__":
    if len(sys.argv) == 4:
        once(sys.argv[1], int(sys.argv[2]), sys.argv[3])
    else:
        main(sys.argv[1] if len(sys.argv) > 1 else "get")
