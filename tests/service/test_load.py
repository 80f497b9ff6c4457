"""A load test against a real ``actionspace serve`` on loopback (issue: the service under attack).

8 clients post calls and poll the runs listing while one posts 1 MB of adversarial raw text, one
posts NaN bodies and 100 MB bodies, and two propose payments that a person approves (each proposing
the next as soon as the last is approved; when an approved run ended is read from its trace once the
load is over, so that the p95 is taken over dozens of approvals, not over a dozen where it is the
maximum). The service must keep the listing's p95 latency and the approval latency under 1 s,
answer no request with 500, and lose nothing from the trace. Bounded: ``ACTIONSPACE_LOAD_S`` seconds
of load (15 by default, the CI size), then at most 60 s to drain.

The 1 s holds for a machine the test has to itself (CI runs it alone). Other processes taking the
cores stretch every latency whatever the service does, so the bound is 1 s times the stretch a
CPU-bound process measures just before and just after the load (``_stretch``: 1.0 on an idle
machine, 2.0 when it gets half a core): a quiet machine is held to 1 s exactly, a busy one to what
1 s is there. The full run::

    ACTIONSPACE_LOAD_S=60 .venv/bin/pytest -m slow tests/service/test_load.py -s

prints the figures.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.load]

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "load-test-admin-token"
TOKENS = {
    "agent-token": {"id": "agent", "scopes": ["runs:write", "runs:read", "read:*"]},
    "mallory-token": {"id": "mallory", "scopes": ["runs:write", "read:*"]},
    "poison-token": {"id": "poisoner", "scopes": ["runs:write"]},
    "payer-token": {"id": "payer", "scopes": ["runs:write", "runs:read", "read:*", "external:*"]},
    "approver-token": {"id": "approver", "scopes": ["approvals:read", "approvals:decide", "runs:read"]},
}
"""Each client acts as its own principal, as separate users of one service would."""
CALLERS = 8
APPROVERS = 2
MB = 1024 * 1024
LATENCY_S = 1.0
"""The p95 bound of the listing and of an approval on a machine the test has to itself."""
_STRETCH = """
import time
wall, cpu = time.perf_counter(), time.process_time()
while time.process_time() - cpu < {seconds}:
    pass
print((time.perf_counter() - wall) / (time.process_time() - cpu))
"""


def _stretch(seconds: float = 1.0) -> float:
    """Wall time over CPU time of a CPU-bound child process burning ``seconds`` of CPU now: how
    much longer than on an idle machine a piece of work takes (never below 1.0)."""
    code = _STRETCH.format(seconds=seconds)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=True
    )
    return max(1.0, float(done.stdout))


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Tally:
    lock: threading.Lock = field(default_factory=threading.Lock)
    statuses: dict[int, int] = field(default_factory=dict)
    listing_s: list[float] = field(default_factory=list)
    approval_s: list[float] = field(default_factory=list)
    approved_run_s: list[float] = field(default_factory=list)
    decided_at: dict[str, datetime] = field(default_factory=dict)
    runs: list[str] = field(default_factory=list)
    adversarial_runs: list[str] = field(default_factory=list)
    refused: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def status(self, code: int) -> None:
        with self.lock:
            self.statuses[code] = self.statuses.get(code, 0) + 1


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] if ordered else 0.0


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    with serving(tmp_path) as base:
        yield base


@contextmanager
def serving(tmp_path: Path) -> Iterator[str]:
    """``actionspace serve`` in a child process on a free loopback port; its base URL."""
    port = _port()
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps(TOKENS))
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    command = [
        str(Path(sys.executable).with_name("actionspace")), "serve", "--no-demo", "--host", "127.0.0.1",
        "--port", str(port), "--token", TOKEN, "--store", f"sqlite://{tmp_path / 'load.db'}",
        "--tools", "tests.service.load_tools:TOOLS", "--tokens", str(tokens),
    ]  # fmt: skip
    process = subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/api/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                output = process.stdout.read().decode() if process.stdout else ""
                raise AssertionError(f"actionspace serve did not start:\n{output[-2000:]}")
            time.sleep(0.2)  # waiting for another process to listen: no event to wait on
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _client(base: str, token: str = TOKEN) -> httpx.Client:
    return httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=30)


def _caller(base: str, index: int, until: float, tally: Tally) -> None:
    with _client(base, "agent-token") as client:
        n = 0
        while time.monotonic() < until:
            n += 1
            call = {"name": "lookup", "arguments": {"city": f"c{index}-{n}"}}
            posted = client.post("/api/runs", json={"calls": [call]})
            tally.status(posted.status_code)
            if posted.status_code == 202:
                with tally.lock:
                    tally.runs.append(posted.json()["run_id"])
            started = time.monotonic()
            listed = client.get("/api/runs", params={"limit": 50})
            elapsed = time.monotonic() - started
            tally.status(listed.status_code)
            with tally.lock:
                tally.listing_s.append(elapsed)


def _adversary(base: str, until: float, tally: Tally) -> None:
    raw = "<think>" * (MB // 7) + '{"name": "lookup", "arguments": {"city": "x"}}'
    with _client(base, "mallory-token") as client:
        while time.monotonic() < until:
            posted = client.post("/api/runs", json={"calls": [raw, " </s>" * (MB // 5)]})
            tally.status(posted.status_code)
            if posted.status_code == 202:
                with tally.lock:
                    tally.adversarial_runs.append(posted.json()["run_id"])


def _huge_body() -> Iterator[bytes]:
    chunk = b"x" * MB
    for _ in range(100):
        yield chunk


def _poisoner(base: str, until: float, tally: Tally) -> None:
    nan = b'{"calls": [{"name": "lookup", "arguments": {"city": NaN}}]}'
    with _client(base, "poison-token") as client:
        while time.monotonic() < until:
            answer = client.post("/api/runs", content=nan, headers={"content-type": "application/json"})
            tally.status(answer.status_code)
            with tally.lock:
                tally.refused[f"nan:{answer.status_code}"] = (
                    tally.refused.get(f"nan:{answer.status_code}", 0) + 1
                )
            try:
                big = client.post(
                    "/api/runs",
                    content=_huge_body(),
                    headers={"content-type": "application/json", "content-length": str(100 * MB)},
                )
                tally.status(big.status_code)
                key = f"100MB:{big.status_code}"
            except httpx.TransportError:  # the server answered 413 and closed while we still sent
                key = "100MB:closed"
            with tally.lock:
                tally.refused[key] = tally.refused.get(key, 0) + 1


def _approver(base: str, index: int, until: float, tally: Tally) -> None:
    with _client(base, "payer-token") as client, _client(base, "approver-token") as person:
        n = 0
        while time.monotonic() < until:
            n += 1
            pay = {"name": "pay", "arguments": {"to": f"acct-{index}-{n}", "amount": n}}
            posted = client.post("/api/runs", json={"calls": [pay]})
            tally.status(posted.status_code)
            if posted.status_code != 202:
                continue
            run_id = posted.json()["run_id"]
            with tally.lock:
                tally.runs.append(run_id)
            request = _pending(person, run_id, tally)
            if request is None:
                continue
            started = time.monotonic()
            decided = person.post(f"/api/approvals/{request}/approve")
            tally.status(decided.status_code)
            with tally.lock:
                tally.approval_s.append(time.monotonic() - started)
                if decided.status_code == 200:  # the run's end is read from its trace after the load
                    tally.decided_at[run_id] = datetime.fromisoformat(decided.json()["decided_at"])


def _pending(client: httpx.Client, run_id: str, tally: Tally) -> str | None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        listed = client.get("/api/approvals")
        tally.status(listed.status_code)
        for request in listed.json() if listed.status_code == 200 else ():
            if request["run_id"] == run_id:
                return str(request["request_id"])
        time.sleep(0.05)  # polling the server as a console does
    with tally.lock:
        tally.errors.append(f"no approval request for {run_id}")
    return None


def _finished(client: httpx.Client, run_id: str, *, deadline_s: float) -> str | None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        row = client.get(f"/api/runs/{run_id}")
        if row.status_code == 200 and row.json()["status"] not in ("running", "open", "waiting_approval"):
            return str(row.json()["status"])
        time.sleep(0.05)  # polling the server as a console does
    return None


def run_load(server: str, seconds: float, *, attackers: bool = True) -> tuple[Tally, dict[str, Any]]:
    """Drive the load for ``seconds``, drain, and return the tally and the figures."""
    tally = Tally()
    until = time.monotonic() + seconds
    workers = [threading.Thread(target=_caller, args=(server, i, until, tally)) for i in range(CALLERS)]
    workers += [threading.Thread(target=_approver, args=(server, i, until, tally)) for i in range(APPROVERS)]
    if attackers:
        workers.append(threading.Thread(target=_adversary, args=(server, until, tally)))
        workers.append(threading.Thread(target=_poisoner, args=(server, until, tally)))
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=seconds + 120)
    assert not any(w.is_alive() for w in workers), "a client did not finish"

    lost: list[str] = []
    with _client(server) as client:
        for run_id in tally.runs + tally.adversarial_runs:
            status = _finished(client, run_id, deadline_s=60)
            events = client.get(f"/api/runs/{run_id}/events").json()
            kinds = [e["kind"] for e in events]
            if status is None or "run_finished" not in kinds or "observation" not in kinds:
                lost.append(run_id)
            elif run_id in tally.decided_at:
                ended = datetime.fromisoformat(next(e["at"] for e in events if e["kind"] == "run_finished"))
                tally.approved_run_s.append((ended - tally.decided_at[run_id]).total_seconds())
    figures = {
        "seconds": seconds,
        "runs": len(tally.runs),
        "adversarial_runs": len(tally.adversarial_runs),
        "listings": len(tally.listing_s),
        "listing_p50_s": round(sorted(tally.listing_s)[len(tally.listing_s) // 2], 4)
        if tally.listing_s
        else 0,
        "listing_p95_s": round(_p95(tally.listing_s), 4),
        "approvals": len(tally.approval_s),
        "approval_p95_s": round(_p95(tally.approval_s), 4),
        "approval_max_s": round(max(tally.approval_s, default=0.0), 4),
        "approve_to_run_finished_p95_s": round(_p95(tally.approved_run_s), 4),
        "statuses": dict(sorted(tally.statuses.items())),
        "refused": tally.refused,
        "lost": len(lost),
    }
    tally.errors.extend(f"lost {run_id}" for run_id in lost)
    return tally, figures


def test_the_service_holds_under_load_and_attack(server: str) -> None:
    seconds = float(os.environ.get("ACTIONSPACE_LOAD_S", "15"))
    before = _stretch()
    tally, figures = run_load(server, seconds)
    figures["stretch"] = stretch = round(max(before, _stretch()), 2)
    print("\nload figures:", figures)
    assert tally.statuses.get(500, 0) == 0, figures
    assert not tally.errors, tally.errors[:5]
    assert tally.listing_s and tally.approval_s, figures
    assert _p95(tally.listing_s) < LATENCY_S * stretch, figures
    assert _p95(tally.approval_s) < LATENCY_S * stretch, figures
    assert tally.refused.get("nan:400", 0) > 0, figures
    assert not any(k.startswith("nan:") and k != "nan:400" for k in tally.refused), figures
