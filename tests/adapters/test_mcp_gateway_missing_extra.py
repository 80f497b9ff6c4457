"""Importing the MCP gateway where the mcp extra is not installed names the extra to install, as
every other module that needs an extra does (``actionspace._extras``), instead of a bare
ModuleNotFoundError from deep inside the import.

The packages are hidden in a subprocess (never uninstalled): by a meta-path finder, or by a
``None`` in ``sys.modules``, the two ways an import finds a package absent.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Final

import pytest

FINDER: Final = """
import importlib.abc, sys
class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {hidden!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, Hide())
"""
NONE_IN_MODULES: Final = "import sys\nfor name in {hidden!r}:\n    sys.modules[name] = None\n"
IMPORT_AND_SAY: Final = """
from actionspace.errors import ConfigurationError
try:
    import actionspace.adapters.mcp_gateway
except ConfigurationError as exc:
    print(type(exc).__name__, isinstance(exc, ImportError), exc.name, sep="|")
    print(exc)
else:
    print("imported")
"""


def _run(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("hiding", [FINDER, NONE_IN_MODULES], ids=["finder", "none-in-sys-modules"])
@pytest.mark.parametrize(
    ("hidden", "absent"),
    [(["mcp"], "mcp"), (["mcp_types"], "mcp_types"), (["mcp", "mcp_types"], "mcp_types")],
)
def test_importing_the_gateway_without_the_mcp_packages_raises_the_error_naming_the_extra(
    hiding: str, hidden: list[str], absent: str
) -> None:
    done = _run(hiding.format(hidden=hidden) + IMPORT_AND_SAY)
    assert done.returncode == 0, done.stderr
    caught, said = done.stdout.splitlines()
    kind, is_import_error, name = caught.split("|")
    assert (kind, is_import_error) == ("MissingExtraError", "True"), (caught, done.stderr)
    # a None in sys.modules makes Python name the submodule it could not reach (mcp.server)
    assert name == absent or name.startswith(f"{absent}."), caught
    assert said == (
        f"actionspace.adapters.mcp_gateway needs the mcp extra (no module {name!r}): "
        "pip install 'actionspace[mcp]'"
    )


def test_the_usual_optional_import_guard_still_catches_the_gateways_error() -> None:
    guard = "try:\n    import actionspace.adapters.mcp_gateway\nexcept ImportError:\n    print('absent')\n"
    done = _run(NONE_IN_MODULES.format(hidden=["mcp"]) + guard)
    assert done.stdout == "absent\n", done.stderr


def test_the_gateway_imports_where_the_extra_is_installed() -> None:
    done = _run(IMPORT_AND_SAY)
    assert done.stdout == "imported\n", done.stderr
