"""``LedgerEntry.evolve`` (slots set directly, without the frozen ``__init__``) is ``replace``."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actionspace.ledger.entries import STATES, LedgerEntry

_JSON = st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=3)
_CHANGES: dict[str, Any] = {
    "state": st.sampled_from(STATES),
    "attempts": st.integers(min_value=0, max_value=9),
    "remote_id": st.none() | st.text(max_size=8),
    "observation": st.none() | _JSON,
    "error": st.none() | _JSON,
    "resolution": st.none() | _JSON,
    "created_at": st.floats(min_value=0, max_value=2e9),
    "updated_at": st.floats(min_value=0, max_value=2e9),
    "arguments": _JSON,
}


@given(st.fixed_dictionaries({}, optional=_CHANGES), _JSON)
def test_evolve_is_replace_with_updated_at_now(changes: dict[str, Any], arguments: dict[str, Any]) -> None:
    entry = LedgerEntry(
        key="as1_0123", run_id="r", node_id="n", tool="t@1", args_digest="d", arguments=arguments
    )
    before = time.time()
    new = entry.evolve(**changes)
    assert new == dataclasses.replace(entry, **{"updated_at": new.updated_at, **changes})
    if "updated_at" not in changes:
        assert before <= new.updated_at <= time.time()
    assert type(new) is LedgerEntry
    assert hash(new.key) == hash(entry.key)
    assert entry.state == "accepted"  # the original is untouched


def test_evolve_refuses_a_name_that_is_not_a_field() -> None:
    entry = LedgerEntry(key="k", run_id="r", node_id="n", tool="t@1", args_digest="d", arguments={})
    with pytest.raises(TypeError, match="bogus"):
        entry.evolve(bogus=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        entry.evolve(state="committed").state = "failed"  # type: ignore[misc]
