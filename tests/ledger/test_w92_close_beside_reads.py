"""Closing a runtime while other threads read its SQLite stores does not crash the process.

Threads of the user's own (not the runtime's) read the ledger, the trace and the run state in a
loop while the main thread closes the runtime. ``close()`` closed every thread's connection from
the closing thread, so a read running just then had its connection freed under its statement: a
segmentation fault of the whole process, or a raw ``sqlite3`` error (``InterfaceError: bad
parameter or other API misuse``). Every read now either returns its answer or raises
``StoreClosedError``; the connection a read was using is closed by its own thread once the read
ended, so no descriptor of the files stays open after the close, while those threads live on.
The race runs many rounds in a child process, since the failure is the process dying.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

_SCRIPT = textwrap.dedent(
    """
    import json, os, random, sys, threading, time, traceback
    from actionspace import Runtime, errors

    StoreClosedError = getattr(errors, "StoreClosedError", ())  # () before it existed: none is caught

    folder, rounds, readers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    seen = {"answers": 0, "closed": 0, "ended": 0, "open_files": 0, "unexpected": {}}
    lock = threading.Lock()

    def open_files(prefix):
        found = 0
        for fd in os.listdir("/proc/self/fd"):
            try:
                found += os.readlink(f"/proc/self/fd/{fd}").startswith(prefix)
            except OSError:
                pass
        return found

    for n in range(rounds):
        path = f"{folder}/r{n}.db"
        rt = Runtime(f"sqlite:///{path}", recover_on_start=False)

        @rt.tool(effect="external", idempotency="none")
        def send(to: str) -> str:
            \"\"\"Send something.\"\"\"
            return f"sent to {to}"

        for i in range(3):
            rt.call({"name": "send", "arguments": {"to": f"p{i}"}}, run_id="r", node_id=f"n{i}")
        ledger, trace, states = rt.ledger, rt.trace, rt.engine.runs.run_states
        key = ledger.get_node("r", "n0").key
        reads = [
            lambda: ledger.get(key),
            lambda: ledger.get_node("r", "n1"),
            lambda: ledger.list(limit=10),
            lambda: trace.events("r"),
            lambda: trace.runs(limit=5),
            lambda: states.load("r"),
            lambda: states.rev("r"),
        ]
        start, leave = threading.Barrier(readers + 1), threading.Event()

        def read(seed):
            pick = random.Random(seed)
            start.wait()
            while True:
                try:
                    answer = pick.choice(reads)()
                except StoreClosedError:
                    with lock:
                        seen["closed"] += 1
                    break
                except Exception as exc:
                    at = traceback.extract_tb(exc.__traceback__)[-1]
                    what = f"{type(exc).__module__}.{type(exc).__name__}: {exc} ({at.filename}:{at.lineno})"
                    with lock:
                        seen["unexpected"][what] = seen["unexpected"].get(what, 0) + 1
                    break
                assert answer is not None
                with lock:
                    seen["answers"] += 1
            leave.wait(60)  # alive past the check below: its connection is closed, not dropped
            with lock:
                seen["ended"] += 1

        threads = [threading.Thread(target=read, args=(n * 1000 + i,)) for i in range(readers)]
        for thread in threads:
            thread.start()
        start.wait()
        time.sleep(random.random() * 0.005)
        rt.close()
        deadline = time.monotonic() + 30
        while seen["closed"] + sum(seen["unexpected"].values()) < (n + 1) * readers:
            if time.monotonic() > deadline:
                sys.exit("a reader neither answered nor raised")
            time.sleep(0.001)
        seen["open_files"] += open_files(path)
        leave.set()
        for thread in threads:
            thread.join(60)
    print(json.dumps(seen))
    """
)


def test_reads_on_other_threads_as_the_runtime_closes_answer_or_raise_store_closed(tmp_path: Path) -> None:
    rounds, readers = 40, 6
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(tmp_path), str(rounds), str(readers)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["unexpected"] == {}
    assert seen["closed"] == rounds * readers  # every reader's last read raised the typed error
    assert seen["ended"] == rounds * readers  # none hung
    assert seen["answers"] > 0
    assert seen["open_files"] == 0  # the connections left to the readers were closed by them
