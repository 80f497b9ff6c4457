"""The gateway's TOML configuration: what it accepts, and the mistakes it refuses to start with."""

from __future__ import annotations

from pathlib import Path

import pytest

from actionspace.adapters._gateway_config import ApprovalPolicy, load_config, parse_config
from actionspace.adapters._gateway_tools import load_python_tools
from actionspace.adapters.mcp_gateway import TOKEN_ENV, Gateway
from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ConfigurationError
from tests.adapters.gateway_support import ALICE_TOKEN, HERE, write_config


def _parse(text: str, tmp_path: Path, **environ: str) -> object:
    path = tmp_path / "g.toml"
    path.write_text(text, encoding="utf-8")
    return load_config(path, environ=environ)


def test_a_full_config_is_read_with_tokens_kept_only_as_digests(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path, upstream_time=True))
    alice = config.principal_by_token(ALICE_TOKEN)
    assert alice is not None and alice.id == "alice"
    assert ALICE_TOKEN not in repr(config)
    assert config.principal_by_token("alice-token-0123456788") is None
    assert config.store == "sqlite:///" + str((tmp_path / "gateway.db").resolve())
    assert config.upstreams[0].tool_prefix == "time_"
    assert config.approval.effects == ("external",)


def test_a_token_can_come_from_an_environment_variable(tmp_path: Path) -> None:
    text = '[[principals]]\nid = "ci"\ntoken_env = "CI_GATEWAY_TOKEN"\nscopes = ["read:*"]\n'
    config = _parse(text, tmp_path, CI_GATEWAY_TOKEN="x" * 32)
    assert getattr(config, "principal_by_token")("x" * 32).id == "ci"  # noqa: B009
    with pytest.raises(ConfigurationError, match="CI_GATEWAY_TOKEN"):
        _parse(text, tmp_path)


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ('[gateway]\nstroe = "memory://"\n', "unknown key"),
        ('[approval]\neffects = ["writes"]\n', "not among"),
        ('[[principals]]\nid = "a"\ntoken = "short"\n', "16 characters"),
        ('[[principals]]\nid = "a"\n[[principals]]\nid = "a"\n', "unique"),
        ('[gateway]\nstdio_principal = "nobody"\n', "not a \\[\\[principals\\]\\] id"),
        ('[[upstreams]]\nname = "x"\n', "exactly one of command and url"),
        ('[[upstreams]]\nname = "x"\ncommand = ["a"]\nurl = "http://h/mcp"\n', "exactly one"),
        ('[[tools]]\nimport = "no_colon_here"\n', "module:attribute"),
        ("[gateway]\nport = 70000\n", "port"),
        ("not toml at all [", "gateway config"),
    ],
)
def test_a_config_mistake_is_refused_with_a_message_naming_it(
    text: str, complaint: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigurationError, match=complaint):
        _parse(text, tmp_path)


def test_python_tools_load_from_a_list_of_tool_functions_by_import_path() -> None:
    specs = load_python_tools("gateway_sample_tools:DESK", pythonpath=[HERE])
    assert [s.name for s in specs] == ["lookup_customer", "create_ticket", "send_refund", "purge_desk"]
    with pytest.raises(ConfigurationError, match="has no"):
        load_python_tools("gateway_sample_tools:MISSING", pythonpath=[HERE])
    with pytest.raises(ConfigurationError, match="neither a ToolSpec"):
        load_python_tools("gateway_sample_tools:count", pythonpath=[HERE])
    with pytest.raises(ConfigurationError, match="cannot import"):
        load_python_tools("no_such_module_anywhere:x")


def test_the_approval_policy_marks_matching_tools_and_leaves_the_rest() -> None:
    policy = ApprovalPolicy(risks=("high",), tools=("wipe",))
    risky = ToolSpec(name="pay", effect="external", fn=lambda: None)
    named = ToolSpec(name="wipe", effect="write", fn=lambda: None)
    plain = ToolSpec(name="read", effect="read", fn=lambda: None)
    assert policy.apply(risky).requires_approval and policy.apply(named).requires_approval
    assert policy.apply(plain) is plain


def test_stdio_needs_a_principal_named_by_token_or_config(tmp_path: Path) -> None:
    raw = {"principals": [{"id": "a", "token": "a" * 20, "scopes": ["*"]}]}
    gateway = Gateway(parse_config(raw, base=tmp_path, environ={}), runtime=None)
    try:
        with pytest.raises(ConfigurationError, match=TOKEN_ENV):
            gateway.stdio_principal({})
        assert gateway.stdio_principal({TOKEN_ENV: "a" * 20}).id == "a"
        with pytest.raises(ConfigurationError, match="no configured principal"):
            gateway.stdio_principal({TOKEN_ENV: "b" * 20})
    finally:
        gateway.close()


def test_http_refuses_to_start_without_any_principal_token(tmp_path: Path) -> None:
    raw = {"gateway": {"store": "memory://"}, "principals": [{"id": "a", "scopes": ["*"]}]}
    gateway = Gateway(parse_config(raw, base=tmp_path, environ={}))
    try:
        with pytest.raises(ConfigurationError, match="token"):
            gateway.http_app()
    finally:
        gateway.close()
