"""Principals are told apart by their id: one made from outside input with an empty id is refused,
never read as a shared ``unknown`` whose approvals and runs any other such principal would own."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from actionspace import Principal, Runtime
from actionspace.errors import ConfigurationError
from actionspace.service import create_app
from actionspace.service.cli import prepare


@pytest.mark.parametrize("recorded", [{}, {"id": ""}, {"id": None}, {"id": "   "}, {"scopes": ["*"]}])
def test_a_recorded_principal_without_an_id_is_refused(recorded: Mapping[str, Any]) -> None:
    with pytest.raises(ValueError, match="id"):
        Principal.from_dict(recorded)


def test_a_recorded_principal_with_an_id_reads_back_as_it_was_recorded() -> None:
    who = Principal(id="pat", scopes=("runs:read",), tenant="acme")
    assert Principal.from_dict(who.to_dict()) == who


@pytest.mark.parametrize("blank", ["", " "])
def test_the_service_refuses_a_token_whose_principal_has_no_id(blank: str) -> None:
    rt = Runtime("memory://", recover_on_start=False)
    try:
        tokens = {"good": Principal(id="pat", scopes=("*",)), "bad": Principal(id=blank, scopes=("*",))}
        with pytest.raises(ConfigurationError, match="id"):
            create_app(rt, tokens=tokens)
    finally:
        rt.close()


def test_serve_refuses_a_tokens_file_whose_principals_share_an_empty_id(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(
        json.dumps({"tok-a": {"scopes": ["runs:read"]}, "tok-b": {"id": "", "scopes": ["approvals:decide"]}}),
        encoding="utf-8",
    )
    with pytest.raises(ConfigurationError, match="tokens"):
        served = prepare(
            store="memory://", host="127.0.0.1", port=0, token="admin", demo=False, tokens_file=str(tokens)
        )
        served.stack.close()
