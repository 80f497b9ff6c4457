"""ExecuteAndTimeout in CI size (the full run: ``actionspace timeouts --trials 10000``)."""

from __future__ import annotations

import pytest

from actionspace.evaluation.timeouts import execute_and_timeout

EXPECTED = {
    "native": "committed_by_same_key_resend",
    "query": "committed_by_status_query",
    "none": "unknown_commit",
}


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_commit_then_timeout_ends_committed_once_or_honestly_unknown(kind: str) -> None:
    result = execute_and_timeout(300, kind)
    assert result["outcomes"] == {EXPECTED[kind]: 300}
    assert result["duplicates"] == 0 and result["lost"] == 0 and result["blind_resends"] == 0
