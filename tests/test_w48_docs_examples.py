"""Every fenced Python example of the README and the guides either runs or says why it cannot.

``tests/test_docs.py`` and ``tests/test_readme.py`` run the ```python blocks; this file accounts
for the rest: a ```py block (a sketch against services the reader has) is listed here with its
reason, and the Python a ```sh block feeds to ``python -`` runs, in a fresh folder, in its own
process. A new sketch, or an example moved into a shell block, fails here until it is listed or runs.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"```(\w*)\n(.*?)```", re.S)
HEREDOC = re.compile(r"python3? - <<'(\w+)'\n(.*?)\n\1\n", re.S)

NOT_RUN = {
    ("durable.md", 0): "a sketch: needs a PostgreSQL server at host 'db' and a plan of the reader's",
    ("durable.md", 1): "needs a PostgreSQL server at host 'db' (the network)",
}
"""(guide, index among its ```py blocks) → why the block is not run."""


def _blocks(language: str) -> list[tuple[str, int, str]]:
    found = []
    for doc in DOCS:
        bodies = [body for lang, body in FENCE.findall(doc.read_text()) if lang == language]
        found += [(doc.name, i, body) for i, body in enumerate(bodies)]
    return found


def test_every_py_sketch_is_listed_with_the_reason_it_is_not_run() -> None:
    sketches = {(doc, i) for doc, i, _ in _blocks("py")}
    assert sketches == set(NOT_RUN), "list the new ```py block in NOT_RUN (or make it a ```python block)"


SHELL_PYTHON = [
    (f"{doc}[{i}]", code)
    for lang in ("sh", "bash")
    for doc, i, body in _blocks(lang)
    for _, code in HEREDOC.findall(body)
]


def test_the_guides_feed_python_to_a_shell() -> None:
    assert any(name.startswith("performance-notes.md") for name, _ in SHELL_PYTHON)


@pytest.mark.parametrize(("name", "code"), SHELL_PYTHON, ids=[n for n, _ in SHELL_PYTHON])
def test_python_fed_to_a_shell_in_the_docs_runs(name: str, code: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-"], input=code, text=True, capture_output=True, cwd=tmp_path, timeout=120
    )
    assert done.returncode == 0, f"{name}: {done.stderr[-2000:]}"
