"""A missing extra is a one-line error naming the pip command, whichever entry point needs it."""

from __future__ import annotations

import subprocess
import sys
from typing import Final

import pytest

BLOCKER: Final = """
import importlib.abc, sys
BLOCKED = {blocked!r}
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, Block())
"""


def _run(blocked: set[str], body: str) -> subprocess.CompletedProcess[str]:
    script = BLOCKER.format(blocked=blocked) + body
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)


def _cli(blocked: set[str], *args: str) -> subprocess.CompletedProcess[str]:
    return _run(
        blocked, f"sys.argv = ['actionspace', *{list(args)!r}]\nfrom actionspace.cli import main\nmain()"
    )


@pytest.mark.parametrize(
    ("blocked", "args", "extra"),
    [
        ({"fastapi"}, ("serve", "--no-demo"), "service"),
        ({"uvicorn"}, ("serve", "--no-demo"), "service"),
        ({"mcp"}, ("gateway", "--config", "gateway.toml"), "mcp"),
        ({"dbos"}, ("worker", "--store", "postgresql://x@localhost/db", "--tools", "m:t"), "durable"),
    ],
)
def test_a_command_whose_extra_is_missing_says_which_pip_command_installs_it(
    blocked: set[str], args: tuple[str, ...], extra: str
) -> None:
    done = _cli(blocked, *args)
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert f"pip install 'actionspace[{extra}]'" in lines[0]


def test_a_postgresql_store_without_the_extra_names_the_pip_command() -> None:
    done = _run(
        {"psycopg", "psycopg_pool"},
        "from actionspace import Runtime\n"
        "from actionspace.errors import ConfigurationError\n"
        "try:\n    Runtime('postgresql://x@localhost/db')\n"
        "except ConfigurationError as exc:\n    print(exc)\n",
    )
    assert "pip install 'actionspace[postgres]'" in done.stdout, done.stderr


@pytest.mark.parametrize(
    ("module", "blocked", "extra"),
    [
        ("actionspace.adapters.openai_agents", "agents", "openai-agents"),
        ("actionspace.adapters.pydantic_ai", "pydantic_ai", "pydantic-ai"),
        ("actionspace.adapters.langgraph", "langchain_core", "langgraph"),
    ],
)
def test_a_framework_adapter_without_its_framework_names_the_pip_command(
    module: str, blocked: str, extra: str
) -> None:
    make = "GovernedToolset(rt)" if module.endswith("pydantic_ai") else "governed_tools(rt)"
    name = make.split("(")[0]
    done = _run(
        {blocked},
        "from actionspace import Runtime\n"
        "from actionspace.errors import ConfigurationError\n"
        f"from {module} import {name}\n"
        "rt = Runtime()\n"
        f"try:\n    {make}\n"
        "except ConfigurationError as exc:\n    print(exc)\n",
    )
    assert f"pip install 'actionspace[{extra}]'" in done.stdout, done.stderr
