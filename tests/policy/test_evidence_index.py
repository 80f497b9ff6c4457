"""Provenance found through an observation's index is what reading every leaf finds.

The reference below is the leaf-by-leaf reading the index replaced: the first leaf that holds the
value as a whole (as it is, by its normalised text, by the number it names), else the first whose
text names it (as a token, a date, a date and time, a number). Generated observations mix the
forms the matching knows (e-mail addresses, money, dates in three formats, times, numerals inside
text, keys) with near misses; every value is looked up in every observation, and the strongest
source of each is what the sources all together give. A long run's call is then timed by count:
its values are looked up in the observations without reading their leaves.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.policy import evidence_index, matching
from actionspace.policy.matching import matches, norm, number, prepare, probe
from actionspace.policy.provenance import Evidence, FieldTrust, leaves, strongest

WORDS = [
    "bob", "Bob", "bob@x.com", "alice@example.com", "pay", "1,000", "$1,000.00", "1000", "2024-05-03",
    "May 3, 2024", "3 May 2024", "10:00", "2024-05-03 10:00", "june 13", "13", "0.5", "-2", "www.example.com",
    "IBAN DE89370400440532013000", "", " ", "bobby", "x",
]  # fmt: skip

scalars = st.one_of(
    st.sampled_from(WORDS),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join),
    st.integers(-3, 1001),
    st.sampled_from([0.5, 1000.0, -0.0, float("nan"), True, False, None]),
    st.text(max_size=6),
)
KEYS = st.sampled_from([*WORDS, "to", "n"])
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=12,
)


def _reference_find(value: Any, data: Any) -> tuple[str, str | None] | None:
    flat = [(p, v, prepare(v) if isinstance(v, str) else None, k) for p, v, k in leaves(data)]
    amount = number(value)
    needle = norm(value) if isinstance(value, str) else None
    for path, leaf, text, key in flat:
        whole = (
            (leaf == value and type(leaf) is type(value))
            or (needle is not None and text is not None and text.text == needle)
            or (amount is not None and number(leaf) == amount)
        )
        if whole:
            return path, path.rsplit("/", 1)[0] if key else path
    for path, _leaf, text, _key in flat:
        if text is not None and matches(value, text) is not None:
            return path, None
    return None


@settings(max_examples=600, deadline=None)
@given(data=values, value=scalars)
def test_the_index_finds_the_leaf_that_reading_every_leaf_finds(data: Any, value: Any) -> None:
    flat = [(p, v, prepare(v) if isinstance(v, str) else None, k) for p, v, k in leaves(data)]
    expected = _reference_find(value, data)
    assert evidence_index.find(value, probe(value), evidence_index.index(flat)) == expected


@settings(max_examples=300, deadline=None)
@given(
    observations=st.lists(st.tuples(values, st.booleans()), max_size=5),
    users=st.lists(st.sampled_from(WORDS), max_size=2),
    value=scalars,
)
def test_the_strongest_source_is_the_strongest_of_every_source(
    observations: list[tuple[Any, bool]], users: list[str], value: Any
) -> None:
    evidence = Evidence(
        [(u, i % 2 == 1) for i, u in enumerate(users)],
        {f"c{i}": ("t", untrusted, data) for i, (data, untrusted) in enumerate(observations)},
        fields=FieldTrust({"t": frozenset({"to"})}),
    )
    assert evidence.strongest(value) == strongest(evidence.sources(value))


def test_a_call_late_in_a_long_run_does_not_read_every_remembered_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from actionspace.policy.provenance_stage import ProvenanceStage

    rt = Runtime("memory://", stages=[ProvenanceStage()])

    @rt.tool(effect="read")
    def rows(n: int) -> list[dict[str, Any]]:
        """Rows."""
        return [
            {"id": i, "email": f"c{i}@example.com", "note": f"customer {i} owes {i}.50"} for i in range(n)
        ]

    @rt.tool(effect="write")
    def pay(to: str, amount: float, memo: str) -> str:
        """Pay."""
        return "ok"

    run = rt.new_run()
    rt.user_input(run, "pay the customer who owes the most")
    for _ in range(300):
        assert rt.call({"name": "rows", "arguments": {"n": 40}}, run_id=run).ok
    read: list[int] = []
    full = matching.matches

    def counted(value: Any, text: Any) -> Any:
        read.append(1)
        return full(value, text)

    monkeypatch.setattr(evidence_index, "matches", counted)
    began = time.perf_counter()
    paid = rt.call(
        {"name": "pay", "arguments": {"to": "c39@example.com", "amount": 77.25, "memo": "thanks, see you"}},
        run_id=run,
    )
    assert paid.ok, paid.error
    # 300 results of 120 texts each: reading them leaf by leaf took 36,000 matches per value
    assert len(read) < 500, (len(read), time.perf_counter() - began)
    proposed = [e for e in rt.trace.events(run) if e.kind == "proposed"][-1]
    assert json.dumps(proposed.data["provenance"]["to"]).count("tool_result") == 1  # the newest result


def test_the_prepared_texts_of_many_results_share_what_repeats() -> None:
    """An observation's keys and short values repeat in every row; each was prepared anew, with
    three sets of its own, empty or not: 250-280 MB for the provenance of 300 results of 150
    rows. A short text is now prepared once, and nothing shares one empty set."""
    import gc
    import tracemalloc

    rows = [
        {"id": i, "name": f"customer {i}", "email": f"c{i}@example.com", "balance": i * 1.5}
        for i in range(150)
    ]
    assert prepare("name") is prepare("name")
    assert prepare("bob").dates is prepare("alice").numbers  # type: ignore[comparison-overlap]  # one empty set
    gc.collect()
    tracemalloc.start()
    try:
        kept = [
            evidence_index.index(
                [(p, v, prepare(v) if isinstance(v, str) else None, k) for p, v, k in leaves(rows)]
            )
            for _ in range(50)
        ]
        used = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(kept) == 50
    assert used < 20_000_000, used  # about 12 MB; 47 MB when every text was prepared anew
