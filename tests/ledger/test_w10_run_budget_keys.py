"""The usage row of a principal's run: one per (run, principal), found by its run's prefix (to
forget a run, of every principal) and never spelled as a row of earlier versions (``run:<id>``,
which still counts for every principal of that run)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.ledger._budget_rows import principal_key, run_key, run_prefix


@settings(max_examples=300)
@given(
    st.text(max_size=6), st.text(max_size=6), st.tuples(st.text(max_size=4), st.none() | st.text(max_size=4))
)
def test_a_runs_rows_are_found_by_its_prefix_and_no_other_runs_are(
    a: str, b: str, who: tuple[str, str | None]
) -> None:
    assert (run_key(a, who) == run_key(b, who)) == (a == b)
    assert run_key(a, who).startswith(run_prefix(b)) == (a == b)
    assert not run_key(a, who).startswith("run:")  # never a scope of earlier versions
    assert run_key(a, who) != principal_key(who)
