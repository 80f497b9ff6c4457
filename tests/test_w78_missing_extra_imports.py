"""On the core install, importing the MCP client or the OpenTelemetry export names the extra to install.

The optional packages are hidden by a meta-path finder in a subprocess (never uninstalled), so the
import fails exactly as it does where the extra was not installed.
"""

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

IMPORT_AND_SAY: Final = """
from actionspace.errors import ConfigurationError
try:
    import {module}
except ConfigurationError as exc:
    print("caught", type(exc).__name__, isinstance(exc, ImportError), exc.name, sep="|")
    print(exc)
else:
    print("imported")
"""


def _run(blocked: set[str], body: str) -> subprocess.CompletedProcess[str]:
    script = BLOCKER.format(blocked=sorted(blocked)) + body
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("module", "blocked", "extra", "absent"),
    [
        ("actionspace.adapters.mcp_client", {"mcp_types"}, "mcp", "mcp_types"),
        ("actionspace.adapters.mcp_client", {"mcp", "mcp_types"}, "mcp", "mcp_types"),
        ("actionspace.adapters.mcp_client", {"mcp"}, "mcp", "mcp"),
        ("actionspace.trace.otel", {"opentelemetry"}, "otel", "opentelemetry"),
    ],
)
def test_importing_a_module_whose_extra_is_missing_raises_the_one_line_error_naming_it(
    module: str, blocked: set[str], extra: str, absent: str
) -> None:
    done = _run(blocked, IMPORT_AND_SAY.format(module=module))
    assert done.returncode == 0, done.stderr
    caught, said = done.stdout.splitlines()
    kind, is_import_error, name = caught.split("|")[1:]
    assert (kind, is_import_error) == ("MissingExtraError", "True"), caught
    assert name == absent
    assert said == (
        f"{module} needs the {extra} extra (no module {absent!r}): pip install 'actionspace[{extra}]'"
    )


@pytest.mark.parametrize(
    ("module", "blocked"),
    [("actionspace.adapters.mcp_client", {"mcp_types"}), ("actionspace.trace.otel", {"opentelemetry"})],
)
def test_the_usual_optional_import_guard_still_catches_it(module: str, blocked: set[str]) -> None:
    done = _run(
        blocked,
        f"try:\n    import {module}\nexcept ImportError:\n    print('absent')\nelse:\n    print('here')\n",
    )
    assert done.stdout == "absent\n", done.stderr


def test_a_plain_import_ends_in_the_line_naming_the_extra_not_a_bare_module_not_found() -> None:
    done = _run({"mcp_types"}, "import actionspace.adapters.mcp_client\n")
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("actionspace._extras.MissingExtraError: "), done.stderr
    assert last.endswith("pip install 'actionspace[mcp]'"), done.stderr


@pytest.mark.parametrize("blocked", [{"mcp_types"}, {"mcp"}, {"mcp", "mcp_types", "opentelemetry"}])
def test_the_gateway_without_the_mcp_packages_prints_one_line_and_fails(blocked: set[str]) -> None:
    body = (
        "sys.argv = ['actionspace', 'gateway', '--config', 'gateway.toml']\n"
        "from actionspace.cli import main\nmain()\n"
    )
    done = _run(blocked, body)
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ") and "pip install 'actionspace[mcp]'" in lines[0]


def test_the_core_commands_run_without_mcp_or_opentelemetry() -> None:
    body = (
        "sys.argv = ['actionspace', 'trace', 'list', '--store', 'memory://']\n"
        "from actionspace.cli import main\nmain()\n"
    )
    done = _run({"mcp", "mcp_types", "opentelemetry"}, body)
    assert done.returncode == 0, done.stderr
    assert "No runs in memory://." in done.stderr
