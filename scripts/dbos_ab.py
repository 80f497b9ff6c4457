"""The DBOS backend's per-node overhead, other code against this code: the bench's sequential loop
(``actionspace.bench._dbos``: plans of 10 nodes, the two backends alternating plan by plan, on a
throwaway PostgreSQL cluster, fsync on) run in a process of each code's own, the codes alternating
block by block (DBOS is one per process, so they cannot share one).

    git archive HEAD src | tar -x -C /tmp/old && python scripts/dbos_ab.py --old /tmp/old/src

Prints each block's ms per node (in process, DBOS, and DBOS minus in process), then per code the
median of the blocks and in how many blocks this code's overhead was the lower.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

NODES = 10
SRC = str(Path(__file__).resolve().parent.parent / "src")


def block(plans: int) -> dict[str, Any]:
    """One block in this process: launch, one warm plan per backend, then the bench's loop."""
    import uuid

    import psycopg

    import actionspace
    from actionspace.bench._dbos import BACKENDS, _plan, _sequential, _tool
    from actionspace.durable import DurableConfig, launch, shutdown
    from actionspace.pgcluster import throwaway_cluster
    from actionspace.runtime import Runtime

    with throwaway_cluster("actionspace_bench") as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE bench_effects (key text PRIMARY KEY, ref text, value bigint)")
        rt = Runtime(store=url, recover_on_start=False)
        rt.add_tool(
            name="bench_write",
            fn=_tool(url),
            effect="write",
            idempotency="native",
            writes=["bench:{ref}"],
            input_schema={
                "type": "object",
                "properties": {"ref": {"type": "string"}, "value": {"type": "integer"}},
                "required": ["ref", "value"],
            },
        )
        try:
            launch(rt, DurableConfig(worker_concurrency=16, system_schema="dbos_bench"))
            tag = uuid.uuid4().hex[:6]
            for backend in BACKENDS:
                rt.run_plan(
                    _plan(f"warm-{backend}-{tag}", NODES), run_id=f"warm-{backend}-{tag}", backend=backend
                )
            spent = _sequential(rt, tag, plans, NODES)
        finally:
            shutdown()
            rt.close()
    ms = {b: spent[b] / (plans * NODES) * 1000 for b in BACKENDS}
    return {"code": actionspace.__file__, **ms, "overhead": ms["dbos"] - ms["inprocess"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="the src folder of the other code")
    parser.add_argument("--blocks", type=int, default=6, help="blocks of each code (default 6)")
    parser.add_argument("--plans", type=int, default=20, help="plans per backend in a block (default 20)")
    parser.add_argument("--block", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.block:
        print(json.dumps(block(args.plans)))
        return
    rows: dict[str, list[dict[str, Any]]] = {"old": [], "new": []}
    for i in range(args.blocks):
        for code in ("old", "new") if i % 2 == 0 else ("new", "old"):
            env = {**os.environ, "PYTHONPATH": args.old if code == "old" else SRC}
            command = [sys.executable, __file__, "--block", "--plans", str(args.plans), "--old", args.old]
            out = subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout
            row = json.loads(out.strip().splitlines()[-1])
            rows[code].append(row)
            print(f"{code} {row['inprocess']:6.2f} {row['dbos']:6.2f} {row['overhead']:6.2f}  {row['code']}")
    for code, found in rows.items():
        medians = {
            k: round(statistics.median(r[k] for r in found), 2) for k in ("inprocess", "dbos", "overhead")
        }
        print(code, "medians (ms per node):", medians)
    lower = sum(n["overhead"] < o["overhead"] for n, o in zip(rows["new"], rows["old"], strict=True))
    print(f"this code's overhead lower in {lower} of {args.blocks} blocks")


if __name__ == "__main__":
    main()
