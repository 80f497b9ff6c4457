"""Candidate sets: phase, capability, error state, ranking, permission after ranking, rank cut."""

from __future__ import annotations

from typing import Any

import pytest

from actionspace import Principal, Runtime, ToolCall
from actionspace.catalog.spec import ToolSpec
from actionspace.discovery import (
    Availability,
    CandidateIndex,
    DiscoveryConfig,
    Ranker,
    request_of,
    words,
)
from actionspace.errors import ConfigurationError

EVERYONE = Principal(id="all", scopes=("*",))


def _spec(name: str, description: str, effect: str = "read", **extra: Any) -> ToolSpec:
    return ToolSpec(name=name, description=description, effect=effect, fn=lambda **_: None, **extra)  # type: ignore[arg-type]


CATALOG = (
    _spec("create_event", "Create a calendar event with attendees.", "write"),
    _spec("list_events", "List the calendar events of a day."),
    _spec("send_email", "Send an email message to a recipient.", "external"),
    _spec("search_files", "Search files in the repository by text."),
    _spec("delete_calendar", "Delete a whole calendar and every event in it.", "write"),
)


def _names(specs: tuple[ToolSpec, ...]) -> list[str]:
    return [s.name for s in specs]


def test_words_split_snake_and_camel_case_and_drop_stopwords() -> None:
    assert words("createEvent for the send_email HTTPServer v2") == [
        "create",
        "event",
        "send",
        "email",
        "http",
        "server",
    ]


def test_bm25_ranks_the_tool_whose_words_match_the_query_first() -> None:
    index = CandidateIndex(CATALOG)
    sel = index.select(request_of(EVERYONE, query="email the recipient a message"))
    assert sel.offered[0].name == "send_email"
    assert sel.scores is not None and sel.scores[0] > sel.scores[-1]
    assert sel.scores == tuple(sorted(sel.scores, reverse=True))


def test_a_top_ranked_tool_the_principal_may_not_use_is_never_offered() -> None:
    index = CandidateIndex(CATALOG)
    reader = Principal(id="reader", scopes=("read:*",))
    unfiltered = index.select(request_of(EVERYONE, query="delete the calendar", limit=1))
    assert _names(unfiltered.offered) == ["delete_calendar"]  # it really is the best match
    sel = index.select(request_of(reader, query="delete the calendar", limit=1))
    assert "delete_calendar" not in _names(sel.offered)
    assert ("delete_calendar@1", "permission") in sel.left_out
    assert _names(sel.offered) == ["list_events"]  # the cut applies to permitted tools only


def test_the_rank_cut_keeps_the_best_and_names_the_rest() -> None:
    index = CandidateIndex(CATALOG)
    sel = index.select(request_of(EVERYONE, query="calendar event", limit=2))
    assert len(sel.offered) == 2
    cut = {key for key, reason in sel.left_out if reason == "rank_cut"}
    assert cut == {s.key for s in CATALOG} - {s.key for s in sel.offered}


def test_phase_and_capability_leave_tools_out_with_their_reason() -> None:
    availability = {
        "create_event": Availability(phases=("execute",)),
        "search_files": Availability(requires=("repository",)),
    }
    index = CandidateIndex(CATALOG, availability=availability)
    sel = index.select(request_of(EVERYONE, phase="plan", capabilities={"calendar"}))
    assert ("create_event@1", "phase") in sel.left_out
    assert ("search_files@1", "capability") in sel.left_out
    assert _names(sel.offered) == ["list_events", "send_email", "delete_calendar"]
    both = index.select(request_of(EVERYONE, phase="execute", capabilities={"repository"}))
    assert _names(both.offered) == _names(CATALOG)


def test_a_recovery_tool_appears_only_after_its_error_and_survives_the_rank_cut() -> None:
    specs = (*CATALOG, _spec("resolve_conflict", "Merge two versions of a record.", "write"))
    index = CandidateIndex(specs, availability={"resolve_conflict": Availability(recovers=("conflict",))})
    before = index.select(request_of(EVERYONE, query="calendar event", limit=2))
    assert ("resolve_conflict@1", "error_state") in before.left_out
    other = index.select(request_of(EVERYONE, query="calendar event", limit=2, errors={"transient"}))
    assert "resolve_conflict" not in _names(other.offered)
    after = index.select(request_of(EVERYONE, query="calendar event", limit=2, errors={"conflict"}))
    assert _names(after.offered)[0] == "resolve_conflict"  # no word in common, yet offered first
    assert len(after.offered) == 2


def test_every_tool_of_the_full_set_is_offered_or_has_exactly_one_reason() -> None:
    index = CandidateIndex(
        CATALOG,
        retired=("old_tool@1",),
        availability={"send_email": Availability(phases=("report",))},
    )
    sel = index.select(
        request_of(Principal(id="p", scopes=("read:*", "write:*")), query="event", limit=1, phase="work")
    )
    offered = {s.key for s in sel.offered}
    left = [key for key, _ in sel.left_out]
    assert sorted(offered | set(left)) == sorted(sel.full_set)
    assert len(left) == len(set(left)) and not offered & set(left)
    assert dict(sel.left_out)["old_tool@1"] == "retired"
    assert dict(sel.left_out)["send_email@1"] == "phase"
    assert sel.reasons()["rank_cut"] == 3


def test_the_permission_mask_is_cached_per_scope_set_and_matches_the_principal() -> None:
    index = CandidateIndex(CATALOG)
    p = Principal(id="p", scopes=("read:*",))
    first = index.permitted(p)
    assert index.permitted(Principal(id="q", scopes=("read:*",))) is first
    assert [bool(x) for x in first] == [p.allows(s.scopes[0]) for s in CATALOG]  # type: ignore[index]


def test_a_negative_limit_and_a_bare_string_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError):
        request_of(EVERYONE, limit=-1)
    with pytest.raises(ConfigurationError):
        Availability(phases="plan")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        Ranker(CATALOG, embedding_weight=1.5)


class _WordEmbedder:
    """Deterministic embedder for tests: one dimension per known word, L2-normalised."""

    VOCAB = ("mail", "email", "message", "calendar", "event", "file")

    def embed(self, texts: Any) -> Any:
        import numpy as np

        rows = []
        for text in texts:
            row = np.array([1.0 if w in text.lower() else 0.0 for w in self.VOCAB], dtype=np.float32)
            norm = float(np.linalg.norm(row))
            rows.append(row / norm if norm else row)
        return np.stack(rows)


def test_an_embedder_blends_with_bm25_so_a_synonym_without_shared_words_ranks() -> None:
    lexical = CandidateIndex(CATALOG).select(request_of(EVERYONE, query="mail", limit=1))
    assert lexical.scores == (0.0,)  # no word in common: BM25 alone cannot tell
    blended = CandidateIndex(CATALOG, embedder=_WordEmbedder()).select(
        request_of(EVERYONE, query="mail", limit=1)
    )
    assert _names(blended.offered) == ["send_email"]


def test_runtime_offer_filters_by_principal_and_records_every_reason() -> None:
    rt = Runtime("memory://", discovery=DiscoveryConfig(limit=2))
    for spec in CATALOG:
        rt.register(spec)
    reader = Principal(id="reader", scopes=("read:*",))
    run = rt.new_run(principal=reader)
    offered = rt.offer(run_id=run, query="delete the calendar events")
    assert [d["name"] for d in offered] == ["list_events", "search_files"]
    event = next(e for e in rt.trace.events(run) if e.kind == "candidates_offered")
    reasons = {item["name"]: item["reason"] for item in event.data["left_out"]}
    assert reasons == {
        "create_event@1": "permission",
        "send_email@1": "permission",
        "delete_calendar@1": "permission",
    }
    assert event.data["full_set"] == [s.key for s in CATALOG]
    assert event.data["principal"] == "reader" and event.data["limit"] == 2
    denied = rt.call(ToolCall(name="delete_calendar", arguments={}), run_id=run)
    assert denied.error is not None and denied.error.category == "unknown_tool"


def test_runtime_offer_by_name_keeps_the_old_contract() -> None:
    rt = Runtime("memory://")
    for spec in CATALOG:
        rt.register(spec)
    run = rt.new_run()
    offered = rt.offer(["send_email", "list_events"], run_id=run)
    assert [d["name"] for d in offered] == ["list_events", "send_email"]
    assert offered[0] == rt.describe("list_events")
    event = next(e for e in rt.trace.events(run) if e.kind == "candidates_offered")
    assert sorted(i["name"] for i in event.data["left_out"] if i["reason"] == "not_requested") == [
        "create_event@1",
        "delete_calendar@1",
        "search_files@1",
    ]
