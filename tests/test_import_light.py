"""Catching an actionspace exception costs no heavy import: ``actionspace.errors`` stays light."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Final

HEAVY: Final = (
    "pydantic",
    "jsonschema_rs",
    "numpy",
    "fastapi",
    "mcp",
    "dbos",
    "opentelemetry",
    "psycopg",
    "bm25s",
    "actionspace.runtime",
)


def _loaded_after(statement: str) -> set[str]:
    """The names in ``sys.modules`` of a fresh interpreter after it ran ``statement``."""
    script = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    return set(json.loads(done.stdout))


def test_importing_the_errors_module_loads_no_heavy_module() -> None:
    loaded = _loaded_after("import actionspace.errors")
    assert "actionspace.errors" in loaded
    assert sorted(name for name in HEAVY if name in loaded) == []


def test_catching_an_error_from_the_package_root_loads_no_heavy_module() -> None:
    loaded = _loaded_after("from actionspace import ActionError, ToolError")
    assert sorted(name for name in HEAVY if name in loaded) == []


def test_the_root_still_serves_every_public_name_on_first_use() -> None:
    loaded = _loaded_after("import actionspace\nassert actionspace.Runtime.__name__ == 'Runtime'")
    assert "actionspace.runtime" in loaded
