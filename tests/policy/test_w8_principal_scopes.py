"""Principals read back from data get exactly the scopes written, never more: a scope written as one
string is one scope, not one per character (``"read:*"`` must not become ``"*"``)."""

from __future__ import annotations

from typing import Any

import pytest

from actionspace.policy.principal import Principal


def test_a_scope_given_as_one_string_is_one_scope_not_its_characters() -> None:
    p = Principal.from_dict({"id": "bot", "scopes": "read:*"})
    assert p.scopes == ("read:*",)
    assert p.allows("read:search")
    assert not p.allows("external:send_money")
    assert p.scopes == Principal(id="bot", scopes="read:*").scopes


@pytest.mark.parametrize("scopes", [{"read:*": True}, 7, [["read:*"]], ["read:*", None], [1]])
def test_scopes_that_are_not_strings_are_refused(scopes: Any) -> None:
    with pytest.raises(ValueError):
        Principal.from_dict({"id": "bot", "scopes": scopes})


@pytest.mark.parametrize("tenant", [{"a": 1}, ["t"], 3])
def test_a_tenant_that_is_not_a_string_is_refused(tenant: Any) -> None:
    with pytest.raises(ValueError):
        Principal.from_dict({"id": "bot", "scopes": [], "tenant": tenant})


def test_lookalike_and_empty_scopes_grant_nothing_else() -> None:
    p = Principal.from_dict({"id": "bot", "scopes": ["", "re\u0430d:*", "\uff52ead:*"]})
    assert not p.allows("read:search")
    assert p.missing(["read:search", "write:x"]) == ["read:search", "write:x"]


def test_recorded_principals_read_back_as_they_were() -> None:
    p = Principal(id="ops", scopes=("read:*", "labels:secret"), tenant="acme:eu")
    assert Principal.from_dict(p.to_dict()) == p
