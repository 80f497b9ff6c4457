"""Two runtimes continuing one run on one store when each saves at the same instant as the other:
neither loses the user's message, the call ids behind the run's labels or the offer its model
answers. "The same instant" is exact here: the second runtime does not read the stored revision
before its step (as when both read it before either saved), so its save meets the other's.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Labels, Runtime
from actionspace.policy.flow import FlowState
from actionspace.policy.labels import Label
from tests.pg import fresh_schema

PASSWORD = "hunter2-correct-horse"
STORES = ["sqlite", "postgres"]


def _runtime(url: str) -> Runtime:
    rt = Runtime(url, recover_on_start=False)

    @rt.tool(effect="read", labels=Labels(confidentiality="secret"))
    def read_password() -> str:
        """Read the stored password."""
        return PASSWORD

    @rt.tool(effect="read", labels=Labels(confidentiality="internal", integrity="untrusted"))
    def read_web(url: str) -> str:
        """Read a web page."""
        return f"page {url}"

    @rt.tool(effect="read")
    def look(who: str) -> str:
        """Look someone up."""
        return who

    @rt.tool(effect="read")
    def find(who: str) -> str:
        """Find someone."""
        return who

    return rt


@contextmanager
def _same_instant(rt: Runtime) -> Iterator[None]:
    """Within the block ``rt`` uses the run as it last read it: another runtime's save that came
    meanwhile is met only by its own save (compare and set)."""
    runs = rt.engine.runs
    runs.refresh = lambda run: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        del runs.refresh


def _url(tmp_path: Path, request: pytest.FixtureRequest, kind: str) -> Iterator[str]:
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path / 'run.db'}"
    else:
        yield from fresh_schema(str(request.getfixturevalue("pg_url")))


@pytest.fixture(params=STORES)
def url(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    yield from _url(tmp_path, request, request.param)


def _category(rt: Runtime, name: str, arguments: dict[str, str], call_id: str | None = None) -> str:
    raw = {"name": name, "arguments": arguments, **({"id": call_id} if call_id else {})}
    obs = rt.call(raw, run_id="conv")
    return obs.status if obs.error is None else obs.error.category


def test_two_messages_received_at_once_in_two_runtimes_are_both_kept_with_distinct_numbers(url: str) -> None:
    a, b = _runtime(url), _runtime(url)
    sa, sb = a.session(run_id="conv"), b.session(run_id="conv")
    sa.user("hello")
    sb.user("hi")  # both hold the run at the same revision now
    sa.user("pay alice")
    with _same_instant(b):
        sb.user("pay bob")
    assert sb.turn == sa.turn == 4
    assert b.run_state("conv").flow.user_texts == ["hello", "hi", "pay alice", "pay bob"]
    assert a.run_state("conv").flow.user_texts == ["hello", "hi", "pay alice", "pay bob"]
    a.close()
    b.close()
    third = _runtime(url)
    flow = third.run_state("conv").flow
    assert flow.user_count == 4
    assert flow.user_texts == ["hello", "hi", "pay alice", "pay bob"]
    assert flow.texts_since(2) == [(3, "pay alice"), (4, "pay bob")]
    third.close()


def test_call_ids_saved_without_waiting_are_merged_when_another_runtime_saved_in_between(url: str) -> None:
    a, b = _runtime(url), _runtime(url)
    assert _category(a, "read_password", {}, "a1") == "ok"
    assert _category(b, "read_password", {}, "b1") == "ok"  # the secret label is in both, as saved
    assert _category(a, "read_web", {"url": "x"}, "a2") == "ok"  # a new label: A saves a revision
    with _same_instant(b):
        assert _category(b, "read_password", {}, "b2") == "ok"  # only a call id behind the label
    a.close()
    b.close()
    third = _runtime(url)
    ids = {source for source, _ in third.run_state("conv").flow.origins()}
    assert {"a1", "b1", "a2", "b2"} <= ids
    third.close()


def test_a_model_answering_its_own_offer_is_judged_by_it_when_another_offer_was_made_at_once(
    url: str,
) -> None:
    a, b = _runtime(url), _runtime(url)
    assert _category(a, "look", {"who": "x"}) == "ok"
    assert _category(b, "look", {"who": "x"}) == "ok"  # both hold the run at the same revision
    a.offer(["look"], run_id="conv")
    with _same_instant(b):
        b.offer(["find"], run_id="conv")
    assert _category(a, "look", {"who": "bob"}) == "ok"  # A's model was offered look
    assert _category(a, "find", {"who": "bob"}) == "unknown_tool"  # never offered to A's model
    assert _category(b, "find", {"who": "bob"}) == "ok"
    assert _category(b, "look", {"who": "bob"}) == "unknown_tool"
    a.offer(["read_password"], run_id="conv")  # made knowing B's offer: it replaces both
    assert _category(b, "find", {"who": "bob"}) == "unknown_tool"
    assert _category(b, "read_password", {}) == "ok"
    assert _category(a, "look", {"who": "bob"}) == "unknown_tool"
    a.close()
    b.close()


def test_an_offer_made_after_reading_an_unsaved_one_of_this_runtime_is_not_undone_by_it(url: str) -> None:
    a, b = _runtime(url), _runtime(url)
    assert _category(a, "look", {"who": "x"}) == "ok"
    assert _category(b, "look", {"who": "x"}) == "ok"
    b.offer(["look"], run_id="conv")
    a.offer(["find"], run_id="conv")  # knowing B's: replaces it everywhere
    assert _category(b, "look", {"who": "bob"}) == "unknown_tool"
    assert _category(b, "find", {"who": "bob"}) == "ok"
    a.close()
    b.close()


def test_merging_a_stored_flow_state_joins_its_labels_and_numbers_local_messages_after_its_own() -> None:
    secret = Label(confidentiality="secret")
    stored = FlowState.from_state(
        {
            "context": secret.to_dict(),
            "groups": [[secret.to_dict(), ["c1"]]],
            "user_count": 2,
            "user_texts": ["first", "theirs"],
        }
    )
    local = FlowState.from_state({"user_count": 1, "user_texts": ["first"]})
    local.add_user_input("mine")
    local.merge(stored, received_after=1)
    assert local.user_texts == ["first", "theirs", "mine"]
    assert local.user_count == 3
    assert local.texts_since(2) == [(3, "mine")]
    assert local.context == secret
    assert ("c1", secret) in local.origins()


def test_merging_reports_the_versions_to_mark_saved_only_when_nothing_local_was_unsaved() -> None:
    stored = FlowState.from_state({"user_count": 1, "user_texts": ["theirs"]})
    local = FlowState()
    at = (local.version, local.label_version)
    assert local.merge(stored, saved_at=at) == (local.version, local.label_version)
    local.add_user_input("mine")
    assert local.merge(stored, received_after=0, saved_at=at) is None


def test_call_ids_two_runtimes_save_without_waiting_at_one_revision_are_all_kept(url: str) -> None:
    a, b = _runtime(url), _runtime(url)
    assert _category(a, "read_password", {}, "a1") == "ok"
    assert _category(b, "read_password", {}, "b1") == "ok"
    assert _category(a, "read_password", {}, "a2") == "ok"
    with _same_instant(b):
        assert _category(b, "read_password", {}, "b2") == "ok"
    assert _category(a, "read_web", {"url": "x"}, "a3") == "ok"  # a new label: saved over all of them
    a.close()
    b.close()
    third = _runtime(url)
    ids = {source for source, _ in third.run_state("conv").flow.origins()}
    assert {"a1", "b1", "a2", "b2", "a3"} <= ids
    third.close()


@settings(max_examples=60, deadline=None)
@given(
    before=st.lists(st.text(max_size=5), max_size=4),
    theirs=st.lists(st.text(max_size=5), max_size=4),
    mine=st.lists(st.text(max_size=5), max_size=4),
)
def test_messages_received_at_once_keep_every_text_once_in_order_of_saving(
    before: list[str], theirs: list[str], mine: list[str]
) -> None:
    stored = FlowState()
    local = FlowState()
    for text in before:
        stored.add_user_input(text)
        local.add_user_input(text)
    for text in theirs:
        stored.add_user_input(text)
    for text in mine:
        local.add_user_input(text)
    local.merge(
        FlowState.from_state({**stored.to_state(), "user_texts": stored.user_texts}),
        received_after=len(before),
    )
    assert local.user_texts == before + theirs + mine
    assert local.user_count == len(before) + len(theirs) + len(mine)
    assert [n for n, _ in local.texts_since(0)] == list(range(1, local.user_count + 1))
