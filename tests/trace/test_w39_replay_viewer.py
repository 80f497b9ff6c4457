"""``trace replay`` shows a secret-labelled run as ``trace show`` does: redacted for a viewer who
may not read its label (no viewer, or one outside its readers without ``labels:secret``), in text
and in JSON; a cleared viewer replays it whole."""

from __future__ import annotations

import dataclasses
import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from actionspace import Runtime
from actionspace.policy.flow_policies import FlowRequest
from actionspace.trace.cli import trace_app
from actionspace.trace.sqlite import SqliteTraceStore

SECRET = "acct-7731-SECRET"
SECRET_LABEL = {"confidentiality": "secret", "integrity": "trusted", "readers": None}


class _PayeeLookup:
    """A flow policy whose failure names the payee it could not look up (as real ones do)."""

    def check(self, request: FlowRequest) -> Any:
        raise LookupError(f"unknown payee {request.arguments.get('to')}")


def _build(*, policy: Any = None) -> Runtime:
    rt = Runtime("memory://", recover_on_start=False, flow_policy=policy)

    @rt.tool(effect="external")
    def pay(amount: int, to: str) -> dict[str, bool]:
        return {"ok": True}

    return rt


def fresh() -> Runtime:
    """The factory ``trace replay --runtime`` loads."""
    return _build(policy=_PayeeLookup())


def _secret_store(tmp: Path, payee: str = SECRET) -> tuple[str, str]:
    rt = _build()
    run = rt.new_run("r")
    rt.user_input(run, f"pay 5 to {payee}")
    assert rt.call({"name": "pay", "arguments": {"amount": 5, "to": payee}}, run_id=run).status == "ok"
    events = [dataclasses.replace(e, data={**e.data, "label": SECRET_LABEL}) for e in rt.trace.events(run)]
    path = tmp / "trace.db"
    store = SqliteTraceStore(path)
    store.append_many(events)
    store.close()
    return run, f"sqlite:///{path}"


def _replay(run: str, store: str, *extra: str) -> Any:
    args = ["replay", run, "--store", store, "--runtime", f"{__name__}:fresh", *extra]
    return CliRunner().invoke(trace_app, args)


def test_replay_of_a_secret_run_shows_no_value_to_a_viewer_not_cleared(tmp_path: Path) -> None:
    run, store = _secret_store(tmp_path)
    for extra in ([], ["--json"], ["--viewer", "mallory"], ["--viewer-scope", "labels:internal"]):
        said = _replay(run, store, *extra)
        assert said.exception is None or isinstance(said.exception, SystemExit), said.output
        assert SECRET not in said.stdout, (extra, said.stdout)
        assert "redacted" in said.stdout, (extra, said.stdout)


def test_replay_of_a_secret_run_is_whole_for_a_holder_of_labels_secret(tmp_path: Path) -> None:
    run, store = _secret_store(tmp_path)
    said = _replay(run, store, "--json", "--viewer-scope", "labels:secret")
    result = json.loads(said.stdout)
    validate = [d for d in result["decisions"] if d["stage"] == "validate"]
    assert validate and all(d["same"] and d["replayed"] == "accepted" for d in validate)
    flow = [d for d in result["decisions"] if d["stage"] == "flow"]
    assert flow and SECRET in flow[0]["replayed"]  # the cleared viewer reads the policy's failure whole


def test_replay_json_and_text_redact_the_same_decisions_as_show_hides(tmp_path: Path) -> None:
    run, store = _secret_store(tmp_path)
    shown = CliRunner().invoke(trace_app, ["show", run, "--store", store, "--json"])
    assert SECRET not in shown.stdout  # the rule replay follows
    text = _replay(run, store)
    assert (
        "validate: recorded accepted, replayed unreplayed: the trace holds the call's arguments redacted"
        in (text.stdout)
    )


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payee=st.text(st.characters(min_codepoint=0x30, max_codepoint=0x7A), min_size=12, max_size=30))
def test_no_payee_of_a_secret_run_reaches_replay_output_without_clearance(tmp_path: Path, payee: str) -> None:
    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    run, store = _secret_store(folder, payee)
    for extra in ([], ["--json"]):
        assert payee not in _replay(run, store, *extra).stdout
