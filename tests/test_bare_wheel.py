"""``pip install actionspace`` is light: the bare wheel, in a fresh venv, runs the README's example."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_PACKAGES = 20
MODEL_OUTPUT = (
    'model_output = {"name": "create_event", "arguments": {"calendar_id": "work", "title": "Standup",'
    ' "start": "2026-01-05T09:00:00Z", "end": "2026-01-05T09:15:00Z"}}\n'
)


def _five_lines() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## In five lines", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block is not None
    return block.group(1)


def _run(*args: str | Path, cwd: Path | None = None) -> str:
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=900, cwd=cwd)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.slow
def test_the_bare_wheel_installs_few_packages_and_runs_the_five_line_example(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    _run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", dist, ROOT)
    [wheel] = dist.glob("actionspace-*.whl")
    venv.create(tmp_path / "venv", with_pip=True)
    python = tmp_path / "venv" / "bin" / "python"
    before = {p["name"].lower() for p in json.loads(_run(python, "-m", "pip", "list", "--format=json"))}
    _run(python, "-m", "pip", "install", "--quiet", wheel)
    after = {p["name"].lower() for p in json.loads(_run(python, "-m", "pip", "list", "--format=json"))}
    installed = sorted(after - before)
    assert "actionspace" in installed
    assert len(installed) <= MAX_PACKAGES, installed
    assert not {"fastapi", "dbos", "mcp", "psycopg", "opentelemetry-sdk", "sqlalchemy"} & set(installed)

    (tmp_path / "example.py").write_text(MODEL_OUTPUT + _five_lines())
    out = _run(python, "example.py", cwd=tmp_path)
    assert out.startswith("invalid_arguments ('change_arguments',)")  # its model omits start's UTC offset
    assert (tmp_path / "actionspace.db").exists()  # sqlite:///actionspace.db is relative
    help_text = _run(tmp_path / "venv" / "bin" / "actionspace", "--help")
    assert "serve" in help_text and "demo" in help_text
