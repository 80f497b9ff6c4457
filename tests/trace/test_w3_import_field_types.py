"""``trace import`` refuses a line whose run id, kind or time has the wrong JSON type, naming the
line, and imports nothing of a file holding one (never reading ``5`` as the run id ``"5"``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from actionspace.trace.cli import trace_app
from actionspace.trace.export import import_jsonl, loads_event
from actionspace.trace.memory import MemoryTraceStore
from actionspace.trace.sqlite import SqliteTraceStore

GOOD = {"run_id": "r1", "seq": 0, "kind": "run_started", "ts": 1.5, "call_id": None, "data": {}}

BAD_FIELDS = [
    ("run_id", 5),
    ("run_id", 5.0),
    ("run_id", None),
    ("run_id", True),
    ("run_id", ["r1"]),
    ("kind", 3),
    ("kind", False),
    ("kind", {"k": "v"}),
    ("ts", "1.5"),
    ("ts", True),
    ("ts", None),
    ("ts", 10**400),
]


@pytest.mark.parametrize(("field", "value"), BAD_FIELDS)
def test_a_line_with_a_field_of_the_wrong_type_is_refused(field: str, value: Any) -> None:
    line = json.dumps({**GOOD, field: value})
    with pytest.raises(ValueError, match=field):
        loads_event(line)


@pytest.mark.parametrize(("field", "value"), BAD_FIELDS)
def test_a_file_with_one_such_line_imports_nothing_and_names_the_line(field: str, value: Any) -> None:
    store = MemoryTraceStore()
    lines = [json.dumps(GOOD), json.dumps({**GOOD, "seq": 1, field: value})]
    with pytest.raises(ValueError, match=r"^line 2: "):
        import_jsonl(store, lines)
    assert store.events("r1") == []
    assert store.events("5") == []


def test_the_cli_refuses_a_numeric_run_id_and_writes_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'trace.db'}"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps(GOOD) + "\n" + json.dumps({"run_id": 5, "seq": 0, "kind": 3, "ts": 2.0, "data": {}}) + "\n"
    )
    result = CliRunner().invoke(trace_app, ["import", str(bad), "--store", url], env={"COLUMNS": "200"})
    assert result.exit_code == 1
    assert "line 2" in result.stderr and "run_id" in result.stderr
    with SqliteTraceStore(tmp_path / "trace.db") as store:
        assert store.events("r1") == [] and store.events("5") == []


@settings(max_examples=100, deadline=None)
@given(
    st.sampled_from(["run_id", "kind"]),
    st.one_of(st.integers(), st.floats(allow_nan=False), st.booleans(), st.none(), st.lists(st.text())),
)
def test_only_text_is_a_run_id_or_a_kind(field: str, value: Any) -> None:
    with pytest.raises(ValueError, match=field):
        loads_event(json.dumps({**GOOD, field: value}))
