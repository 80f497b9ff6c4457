"""Fixtures shared by the plan tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.plan.settings_table import make_settings_db


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """An environment database with an empty settings table (the atomic-group tests' world)."""
    return make_settings_db(tmp_path / "env.db")
