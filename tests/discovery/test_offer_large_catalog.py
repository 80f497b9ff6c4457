"""Offering tools from a large catalog every turn: the trace records the catalog once per run and
each offer's reasons packed, an offer does not walk the catalog, and every reader (replay, the
rendering, :func:`left_out_of`) reads the packed form as it read the listed one."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.discovery import Availability, CandidateIndex, request_of
from actionspace.policy.principal import Principal
from actionspace.trace.events import TraceEvent
from actionspace.trace.offers import LISTED_MAX, left_out_of, with_full_set
from actionspace.trace.render import summarize_event
from actionspace.trace.replay import replay_events

VERBS = ("send", "list", "update", "archive", "refund", "search", "book", "merge")
NOUNS = ("invoice", "ticket", "calendar", "payment", "report", "vendor", "repo", "message")
SCOPES = ("read:*", "none:*", "write:update_*", "write:archive_*", "external:send_*")


def _name(i: int) -> str:
    return f"{VERBS[i % len(VERBS)]}_{NOUNS[(i // len(VERBS)) % len(NOUNS)]}_{i}"


def _catalog(rt: Runtime, n: int) -> None:
    effects = ("read", "none", "write", "external")
    for i in range(n):
        rt.add_tool(
            name=_name(i),
            input_schema={"type": "object", "properties": {"id": {"type": "string"}}},
            fn=lambda **_: 1,
            effect=effects[i % len(effects)],
            description=f"{VERBS[i % len(VERBS)].capitalize()} one {NOUNS[(i // 8) % 8]} by id.",
        )
        if i % 10 == 3:
            rt.discovery.annotate(_name(i), phases=("review",))


def _offers(rt: Runtime, run: str) -> list[TraceEvent]:
    return [e for e in rt.trace.events(run) if e.kind == "candidates_offered"]


def test_a_large_catalog_offered_every_turn_records_its_full_set_once() -> None:
    rt = Runtime("memory://")
    _catalog(rt, 3 * LISTED_MAX)
    s = rt.session(provider="openai_chat", offer={"query": "send the invoice", "limit": 10, "phase": "plan"})
    s.user("send the invoice")
    for _ in range(25):
        assert len(s.tools()) == 10
    first, *later = _offers(rt, s.run_id)
    assert len(first.data["full_set"]) == 3 * LISTED_MAX
    assert all("full_set" not in e.data and e.data["catalog"] == first.data["catalog"] for e in later)
    # each later offer is the offered tools and a few hundred bytes of packed reasons, not the catalog
    assert max(len(json.dumps(e.data)) for e in later) < 3000
    seen: dict[str, Any] = {}
    for e in (first, *later):
        left = left_out_of(with_full_set(e.data, seen))
        assert len(left) == 3 * LISTED_MAX - 10
        assert Counter(reason for _, reason in left) == Counter(e.data["reasons"])
        assert {key for key, _ in left}.isdisjoint(f"{o['name']}@{o['version']}" for o in e.data["offered"])
    rt.close()


def test_a_small_catalog_is_listed_in_every_offer_as_before() -> None:
    rt = Runtime("memory://")
    _catalog(rt, LISTED_MAX)
    s = rt.session(provider="openai_chat", offer={"limit": 5})
    s.user("hi")
    s.tools()
    s.tools()
    for e in _offers(rt, s.run_id):
        assert "catalog" not in e.data and len(e.data["full_set"]) == LISTED_MAX
        assert [(i["name"], i["reason"]) for i in e.data["left_out"]] == left_out_of(e.data)
    rt.close()


def _python_calls(fn: Any) -> int:
    calls = 0

    def count(_frame: Any, event: str, _arg: Any) -> None:
        nonlocal calls
        calls += event == "call"

    sys.setprofile(count)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return calls


def test_an_offer_costs_the_same_python_calls_whatever_the_catalog_size() -> None:
    """An agent loop offers every turn: the catalog's size must not be walked in Python each time
    (the selection is vector operations over the index, built once per catalog change)."""
    per_size = {}
    for n in (LISTED_MAX + 100, 8 * LISTED_MAX):
        rt = Runtime("memory://")
        _catalog(rt, n)
        s = rt.session(provider="openai_chat", offer={"query": "archive the report", "limit": 8})
        s.user("archive the report")
        s.tools()  # builds the index and records the full set
        per_size[n] = [_python_calls(s.tools) for _ in range(3)]
        rt.close()
    small, large = per_size.values()
    assert max(large) <= max(small) + 5, per_size


def test_a_replay_re_decides_packed_offers_against_the_fresh_catalog() -> None:
    def runtime() -> Runtime:
        rt = Runtime("memory://")
        _catalog(rt, 2 * LISTED_MAX)
        return rt

    rt = runtime()
    run = rt.new_run()
    rt.offer(run_id=run, query="merge the repo", limit=6)
    rt.offer([_name(i) for i in range(0, 2 * LISTED_MAX, 3)], run_id=run, query="book a calendar", limit=4)
    rt.offer(run_id=run, phase="review", errors=["conflict"])
    events = rt.trace.events(run)
    assert sum("full_set" in e.data for e in _offers(rt, run)) == 1
    result = replay_events(run, events, runtime())
    assert [d.stage for d in result.decisions].count("offer") == 3
    assert result.differences == [] and result.unreplayed == []
    changed = runtime()
    changed.catalog.retire(f"{_name(9)}@{changed.catalog.get(_name(9)).version}")
    assert {d.stage for d in replay_events(run, events, changed).differences} == {"offer"}


def test_a_second_process_continuing_the_run_records_the_full_set_it_has_not_seen(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'run.db'}"
    first = Runtime(url)
    _catalog(first, 2 * LISTED_MAX)
    run = first.new_run()
    first.offer(run_id=run, query="refund a payment", limit=5)
    first.offer(run_id=run, query="refund a payment", limit=5)
    first.close()
    second = Runtime(url)
    _catalog(second, 2 * LISTED_MAX)
    second.offer(run_id=run, query="search a vendor", limit=5)
    offers = _offers(second, run)
    assert ["full_set" in e.data for e in offers] == [True, False, True]
    seen: dict[str, Any] = {}
    assert all(len(left_out_of(with_full_set(e.data, seen))) == 2 * LISTED_MAX - 5 for e in offers)
    second.close()


def test_a_packed_offer_renders_its_counts() -> None:
    rt = Runtime("memory://")
    _catalog(rt, 2 * LISTED_MAX)
    run = rt.new_run()
    rt.offer(run_id=run, query="send a message", limit=3)
    line = summarize_event(_offers(rt, run)[0])
    assert line.startswith("3 offered: ") and f"{2 * LISTED_MAX - 3:,} left out: " in line
    rt.close()


_INDEXES: dict[int, CandidateIndex] = {}


def _index(n: int) -> CandidateIndex:
    if n not in _INDEXES:
        rt = Runtime("memory://")
        _catalog(rt, n)
        specs = rt.catalog.offerable()
        availability = {
            s.name: Availability(
                phases=("review",) if i % 10 == 3 else (),
                requires=("mail",) if i % 7 == 2 else (),
                recovers=("conflict",) if i % 50 == 11 else (),
            )
            for i, s in enumerate(specs)
        }
        retired = [f"{_name(i)}@0.9.0" for i in range(n % 5)]
        _INDEXES[n] = CandidateIndex(specs, retired=retired, availability=availability)
        rt.close()
    return _INDEXES[n]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.sampled_from((LISTED_MAX - 3, LISTED_MAX + 1, 3 * LISTED_MAX + 7)),
    query=st.none() | st.sampled_from(("send the invoice", "archive old tickets", "zzz")),
    limit=st.none() | st.integers(0, 30),
    phase=st.none() | st.sampled_from(("review", "plan")),
    capabilities=st.none() | st.sets(st.sampled_from(("mail", "calendar"))),
    errors=st.sets(st.sampled_from(("conflict", "timeout"))),
    scopes=st.sets(st.sampled_from(SCOPES), min_size=1),
    names=st.none() | st.sets(st.integers(0, 3 * LISTED_MAX + 10), max_size=60),
)
def test_either_form_of_the_event_reads_back_as_the_selections_reasons(
    n: int,
    query: str | None,
    limit: int | None,
    phase: str | None,
    capabilities: set[str] | None,
    errors: set[str],
    scopes: set[str],
    names: set[int] | None,
) -> None:
    index = _index(n)
    request = request_of(
        Principal(id="p", scopes=tuple(sorted(scopes))),
        query=query,
        limit=limit,
        phase=phase,
        capabilities=capabilities,
        errors=errors,
        names=None if names is None else {_name(i) for i in names},
    )
    selection = index.select(request)
    event = selection.event()
    assert ("catalog" in event) == (len(selection.full_set) > LISTED_MAX)
    assert event["full_set"] == list(selection.full_set)
    assert left_out_of(event) == list(selection.left_out)
    json.loads(json.dumps(event))  # plain JSON, as every trace store writes it
    if "catalog" in event:  # recorded already: the full set is left out and read from earlier
        later = selection.event({event["catalog"]})
        assert "full_set" not in later
        assert left_out_of(with_full_set(later, {event["catalog"]: event["full_set"]})) == left_out_of(event)
