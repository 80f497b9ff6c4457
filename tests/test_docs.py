"""Every ```python block in README.md and docs/ runs, in order, per file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").glob("*.md"))
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_python_examples_in_the_docs_run(doc: Path) -> None:
    blocks = BLOCK.findall(doc.read_text())
    assert blocks, f"{doc.name} has no python example"
    namespace: dict[str, object] = {"__name__": f"docs_{doc.stem}"}
    for i, block in enumerate(blocks):
        code = compile(block, f"{doc.name}[{i}]", "exec")
        exec(code, namespace)
