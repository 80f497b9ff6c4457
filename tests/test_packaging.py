"""What ships beside the code: the licence as declared, the extras the errors name, the container image."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from actionspace._extras import EXTRAS

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_licence_file_is_the_apache_licence_the_metadata_declares() -> None:
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text


def test_every_extra_an_error_can_name_is_declared() -> None:
    declared = set(PYPROJECT["project"]["optional-dependencies"])
    assert set(EXTRAS) <= declared
    assert declared - set(EXTRAS) == {"dev", "bench"}


def test_the_core_has_none_of_the_optional_parts() -> None:
    core = " ".join(PYPROJECT["project"]["dependencies"]).lower()
    for heavy in ("fastapi", "uvicorn", "dbos", "psycopg", "mcp", "opentelemetry", "agentdojo"):
        assert heavy not in core


def test_the_dev_extra_pulls_every_extra_the_tests_use() -> None:
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert "actionspace[all]" in extras["dev"]
    [everything] = extras["all"]
    named = set(re.search(r"\[(.*)\]", everything).group(1).split(","))  # type: ignore[union-attr]
    assert named == set(EXTRAS) - {"all", "embeddings"}


def test_the_container_installs_the_wheel_with_declared_extras_and_serves() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    [extras] = re.findall(r"\$\{WHEEL\}\[([a-z,-]+)\]", dockerfile)
    assert set(extras.split(",")) <= set(PYPROJECT["project"]["optional-dependencies"])
    assert 'ENTRYPOINT ["actionspace"]' in dockerfile and '"serve"' in dockerfile
    assert "pip wheel" in dockerfile
