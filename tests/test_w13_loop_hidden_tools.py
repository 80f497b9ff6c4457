"""A model calling a tool the session does not offer it this turn (hidden by the principal's
scopes, by the phase, by the host's list of names) must get exactly the answer a name the catalog
does not hold gets: the same category, message shape, suggestions and alternatives. Otherwise
comparing the answers to a name and to a near misspelling of it tells the model the hidden tool
exists (a one-letter variant of an offered tool is told "did you mean", the hidden one is not)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Principal, Runtime
from actionspace.session import PROVIDERS, Provider, Session

OFFERED = {
    "get_invoice": ("read", "low"),
    "delete_invoice": ("write", "high"),
    "send_invoice": ("external", "medium"),
    "archive_report": ("write", "low"),
}
HIDDEN = {
    "delete_invoices": ("write", "low"),
    "get_invoices": ("write", "high"),
    "send_invoices": ("read", "low"),
    "archive_reports": ("external", "high"),
    "purge_invoice": ("write", "high"),
}


def _runtime(how: str) -> Runtime:
    rt = Runtime("memory://")
    for name, (effect, risk) in {**OFFERED, **HIDDEN}.items():
        rt.add_tool(
            name=name,
            input_schema={"type": "object", "properties": {"invoice_id": {"type": "string"}}},
            fn=lambda invoice_id="", name=name: name,
            effect=effect,
            risk=risk,
            scopes=[f"use:{name}"],
        )
    if how == "phase":
        for name in HIDDEN:
            rt.discovery.annotate(name, phases=["admin"])
    return rt


def _session(rt: Runtime, how: str, provider: Provider) -> Session:
    names = OFFERED if how == "scopes" else {**OFFERED, **HIDDEN}
    principal = Principal(id="alice", scopes=[f"use:{n}" for n in names])
    offer: dict[str, Any] = {"phase": "work"} if how == "phase" else {}
    if how == "names":
        offer["names"] = list(OFFERED)
    s = rt.session(run_id=f"run-{how}-{provider}", provider=provider, principal=principal, offer=offer)
    s.user("tidy up the invoices")
    return s


def _offered_names(provider: Provider, tools: Any) -> set[str]:
    return {str(t["function"]["name"] if provider == "openai_chat" else t["name"]) for t in tools}


def _call(provider: Provider, call_id: str, name: str) -> Any:
    args = {"invoice_id": "inv-1"}
    if provider == "openai_chat":
        entry = {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        return {"role": "assistant", "content": None, "tool_calls": [entry]}
    if provider == "openai_responses":
        return [{"type": "function_call", "call_id": call_id, "name": name, "arguments": json.dumps(args)}]
    if provider == "gemini":
        return {"role": "model", "parts": [{"functionCall": {"id": call_id, "name": name, "args": args}}]}
    return {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": call_id, "name": name, "input": args}],
    }


def _seen(s: Session, name: str) -> dict[str, Any]:
    """What the model reads of its call of ``name``, with the name itself written as ``<name>``."""
    turn = s.handle(_call(s.provider, "c1", name))
    (obs,) = turn.observations
    assert obs.status == "error" and obs.error is not None
    (message,) = turn.messages
    if s.provider == "openai_chat":
        text = message["content"]
    elif s.provider == "openai_responses":
        text = message["output"]
    elif s.provider == "gemini":
        ((key, text),) = message["parts"][0]["functionResponse"]["response"].items()
        assert key == ("error" if json.loads(text)["status"] == "error" else "output")
    else:
        text = message["content"][0]["content"][0]["text"]
    error = json.loads(text)["error"]
    error["message"] = error["message"].replace(repr(name), "<name>")
    return dict(error)


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("how", ["scopes", "phase", "names"])
@pytest.mark.parametrize("hidden", sorted(HIDDEN))
def test_a_hidden_tool_is_answered_as_a_name_the_catalog_does_not_hold(
    hidden: str, how: str, provider: Provider
) -> None:
    rt = _runtime(how)
    s = _session(rt, how, provider)
    assert _offered_names(provider, s.tools()) == set(OFFERED)
    missing = hidden[:-1] + ("z" if hidden[-1] != "z" else "y")
    assert rt.catalog.current(missing) is None
    seen_hidden, seen_missing = _seen(s, hidden), _seen(s, missing)
    assert seen_hidden["category"] == "unknown_tool"
    assert seen_hidden == seen_missing
    assert not re.search("|".join(HIDDEN), json.dumps(seen_hidden))
    rt.close()


@settings(max_examples=60, deadline=None)
@given(
    effect=st.sampled_from(["read", "write", "external"]),
    risk=st.sampled_from(["low", "medium", "high"]),
    stem=st.sampled_from(sorted(OFFERED)),
    tail=st.sampled_from(["s", "_all", "x", "_now"]),
)
def test_any_hidden_near_name_reads_as_missing(effect: str, risk: str, stem: str, tail: str) -> None:
    """Whatever the hidden tool's effect and risk, its near names and it read alike."""
    rt = Runtime("memory://")
    for name, (e, r) in OFFERED.items():
        rt.add_tool(name=name, input_schema={"type": "object"}, fn=lambda: "ok", effect=e, risk=r)
    hidden = stem + tail
    rt.add_tool(
        name=hidden,
        input_schema={"type": "object"},
        fn=lambda: "ok",
        effect=effect,
        risk=risk,
        scopes=["root"],
    )
    principal = Principal(id="bob", scopes=["read:*", "write:*", "external:*"])
    s = rt.session(run_id="r", provider="anthropic", principal=principal)
    s.user("go")
    assert hidden not in _offered_names("anthropic", s.tools())
    assert _seen(s, hidden) == _seen(s, stem + tail.upper() + "q")
    rt.close()
