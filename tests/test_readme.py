"""The README's python examples run."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_python_examples_run() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    runnable = [b for b in blocks if "model_output" not in b]  # the first one is a sketch
    assert runnable
    for i, block in enumerate(runnable):
        exec(compile(block, f"README[{i}]", "exec"), {"__name__": "readme"})
