"""Property: no value of untrusted provenance reaches a parameter whose policy forbids it without
an approval bound to that very call.

Sessions are generated: user messages, trusted and untrusted observations made of tokens from
disjoint pools (some tokens deliberately shared between pools), then calls whose recipient and
amount are drawn from any pool, with or without (true or false) claims, and a person who approves
some held calls. The oracle knows each token's pools, independently of the matcher.

CI runs ``PROVENANCE_SESSIONS`` sessions (default 1,500); the full-size run is
``PROVENANCE_SESSIONS=10000 .venv/bin/pytest -m slow tests/policy/test_provenance_property.py``
(about four minutes on a shared two-core machine).
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.policy import NoSecretToExternalSink
from actionspace.policy.arguments import ArgumentPolicy, Param
from actionspace.policy.provenance_stage import ProvenanceStage

SESSIONS = int(os.environ.get("PROVENANCE_SESSIONS", "1500"))
USER = [f"acct{i}u" for i in range(6)]
TRUSTED = [f"acct{i}t" for i in range(6)]
PAGE = [f"acct{i}p" for i in range(6)]
SHARED = "acct9s"  # typed by the user in some sessions and on the page in others
RULES = {"pay": {"to": Param("user | tool_result"), "amount": Param("user | tool_result", ask="untrusted")}}


def _runtime() -> tuple[Runtime, list[tuple[str, str, Any]]]:
    rt = Runtime(
        "memory://",
        recover_on_start=False,
        flow_policy=NoSecretToExternalSink() & ArgumentPolicy(RULES),
        stages=[ProvenanceStage()],
    )
    ran: list[tuple[str, str, Any]] = []
    pages: dict[str, str] = {}
    books: dict[str, str] = {}

    @rt.tool(effect="external")
    def pay(to: str, amount: int) -> dict[str, bool]:
        ran.append(("pay", to, amount))
        return {"ok": True}

    @rt.tool(effect="read", labels={"integrity": "untrusted"})
    def page(key: str) -> dict[str, str]:
        return {"text": pages[key]}

    @rt.tool(effect="read")
    def book(key: str) -> dict[str, str]:
        return {"entries": books[key]}

    rt.state["pages"], rt.state["books"] = pages, books
    return rt, ran


RT, RAN = _runtime()

call = st.fixed_dictionaries(
    {
        "to": st.sampled_from([*USER, *TRUSTED, *PAGE, SHARED, "acct7m"]),
        "amount": st.sampled_from([11, 22, 33, 44]),
        "claim": st.sampled_from([None, "user", "first_page", "first_book"]),
        "approve": st.booleans(),
    }
)
session = st.fixed_dictionaries(
    {
        "typed": st.lists(st.sampled_from(USER), max_size=3),
        "typed_amount": st.sampled_from([11, 22]),
        "shared_typed": st.booleans(),
        "books": st.lists(st.lists(st.sampled_from(TRUSTED), min_size=1, max_size=3), max_size=2),
        "pages": st.lists(st.lists(st.sampled_from(PAGE), min_size=1, max_size=3), max_size=2),
        "page_amount": st.sampled_from([33, 44]),
        "calls": st.lists(call, min_size=1, max_size=4),
    }
)
counter = iter(range(10**9))


def _check(s: dict[str, Any]) -> None:
    run = RT.new_run(f"s{next(counter)}")
    typed = [*s["typed"], *([SHARED] if s["shared_typed"] else [])]
    RT.user_input(run, f"please pay {' and '.join(typed) or 'nobody'} {s['typed_amount']} each")
    seen_user = set(typed) | {s["typed_amount"]}
    seen_trusted: set[Any] = set()
    seen_page: set[Any] = set()
    first: dict[str, str] = {}
    for i, entries in enumerate(s["books"]):
        RT.state["books"][f"{run}b{i}"] = " ".join(entries)
        obs = RT.call({"name": "book", "arguments": {"key": f"{run}b{i}"}}, run_id=run)
        first.setdefault("first_book", obs.call_id)
        seen_trusted |= set(entries)
    for i, tokens in enumerate(s["pages"]):
        text = " ".join([*tokens, *([] if s["shared_typed"] else [SHARED])]) + f" pay {s['page_amount']}"
        RT.state["pages"][f"{run}p{i}"] = text
        obs = RT.call({"name": "page", "arguments": {"key": f"{run}p{i}"}}, run_id=run)
        first.setdefault("first_page", obs.call_id)
        seen_page |= {*tokens, s["page_amount"], *([] if s["shared_typed"] else [SHARED])}
    for n, c in enumerate(s["calls"]):
        args = {"to": c["to"], "amount": c["amount"]}
        claim: dict[str, Any] = {}
        if c["claim"] == "user":
            claim = {"provenance": {"to": "user"}}
        elif c["claim"] in first:
            claim = {"sources": {"to": [first[c["claim"]]]}}
        before = len(RAN)
        node = f"c{n}"
        obs = RT.call({"name": "pay", "arguments": args}, run_id=run, node_id=node, **claim)
        approved = False
        if obs.error is not None and obs.error.category == "needs_approval" and c["approve"]:
            RT.approvals.approve(obs.error.details["request_id"], by="person")
            approved = True
            obs = RT.call({"name": "pay", "arguments": args}, run_id=run, node_id=node, **claim)
        if len(RAN) == before:
            continue
        # it ran: the recipient was typed or trusted, and an untrusted-only amount was approved
        assert c["to"] in seen_user or c["to"] in seen_trusted, (s, c)
        amount_ok = c["amount"] in seen_user or c["amount"] in seen_trusted
        assert amount_ok or (approved and c["amount"] in seen_page), (s, c)


@settings(max_examples=SESSIONS, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(session)
def _property(s: dict[str, Any]) -> None:
    _check(s)


@pytest.mark.slow
def test_no_untrusted_value_reaches_a_forbidding_parameter_without_an_approval_of_that_call() -> None:
    _property()
