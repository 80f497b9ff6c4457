"""Fixtures shared by every test package."""

from tests.pg import pg_url

__all__ = ["pg_url"]
