"""A credential given as a parameter's Python default is never offered to the model in the tool's
schema (``SecretStr``/``SecretBytes`` parameters, or a default shaped like a credential); the tool
still receives the default when the model leaves the argument out."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, SecretBytes, SecretStr

from actionspace import Runtime, ToolCall
from actionspace.catalog.functions import spec_from_function

LIVE_KEY = "sk-live-123"
GITHUB = "ghp_0123456789abcdefghijABCDEFGHIJklmnop"
PASSWORD = SecretStr("hunter2")
RAW = SecretBytes(b"bytes-secret")
MAYBE = SecretStr("optional-secret")


def search(
    query: str,
    api_key: str = LIVE_KEY,
    password: SecretStr = PASSWORD,
    raw: SecretBytes = RAW,
    maybe: SecretStr | None = MAYBE,
    endpoint: str = "postgresql://admin:hunter2@db/x",
    limit: int = 10,
    region: str = "eu-west-1",
) -> dict[str, Any]:
    """Search with credentials the model must not see."""
    return {
        "api_key": api_key,
        "password": password.get_secret_value(),
        "raw": raw.get_secret_value().decode(),
        "maybe": None if maybe is None else maybe.get_secret_value(),
        "endpoint": endpoint,
        "limit": limit,
        "region": region,
    }


def _offered(schema: Mapping[str, Any], name: str) -> dict[str, Any]:
    prop: dict[str, Any] = schema["properties"][name]
    return prop


def test_a_credential_shaped_default_is_not_in_the_offered_schema() -> None:
    schema = spec_from_function(search, effect="read").input_schema
    text = json.dumps(schema)
    assert LIVE_KEY not in text
    assert "hunter2" not in text
    for name in ("api_key", "endpoint"):
        assert "default" not in _offered(schema, name)
        assert name not in schema.get("required", [])  # still optional


def test_a_secret_typed_parameter_shows_no_default_even_masked() -> None:
    schema = spec_from_function(search, effect="read").input_schema
    for name in ("password", "raw", "maybe"):
        assert "default" not in _offered(schema, name), name
        assert name not in schema.get("required", [])
    assert "**********" not in json.dumps(schema)


def test_ordinary_defaults_are_still_offered() -> None:
    schema = spec_from_function(search, effect="read").input_schema
    assert _offered(schema, "limit")["default"] == 10
    assert _offered(schema, "region")["default"] == "eu-west-1"


class Settings(BaseModel):
    token: SecretStr = SecretStr("nested-secret")
    url: str = "https://svc.example.com"


DEFAULT_SETTINGS = Settings()


def configure(settings: Settings = DEFAULT_SETTINGS, key: str = GITHUB) -> str:
    """Configure a service."""
    return settings.token.get_secret_value()


def test_a_nested_secret_default_is_not_offered_either() -> None:
    schema = spec_from_function(configure, effect="read").input_schema
    text = json.dumps(schema)
    assert GITHUB not in text
    assert "**********" not in text
    assert "nested-secret" not in text


def test_the_tool_still_gets_its_default_credentials_when_the_argument_is_omitted() -> None:
    rt = Runtime("memory://")
    rt.tool(effect="read")(search)
    offered = json.dumps(rt.catalog.get("search").input_schema)
    assert LIVE_KEY not in offered
    assert "**********" not in offered
    obs = rt.call(ToolCall(name="search", arguments={"query": "q"}), run_id="defaults")
    assert obs.status == "ok", obs.error
    assert obs.data == {
        "api_key": LIVE_KEY,
        "password": "hunter2",
        "raw": "bytes-secret",
        "maybe": "optional-secret",
        "endpoint": "postgresql://admin:hunter2@db/x",
        "limit": 10,
        "region": "eu-west-1",
    }


def test_an_argument_the_model_gives_still_replaces_the_hidden_default() -> None:
    rt = Runtime("memory://")
    rt.tool(effect="read")(search)
    obs = rt.call(
        ToolCall(name="search", arguments={"query": "q", "password": "given", "api_key": "other"}),
        run_id="given",
    )
    assert obs.status == "ok", obs.error
    assert obs.data["password"] == "given"
    assert obs.data["api_key"] == "other"
