"""What the model reads of a result is encoded as it always was: the memo of the last second
rendered and the encoder made once change nothing in the text."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from actionspace.discovery._content import _iso, dumps

values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text() | st.builds(object) | st.dates(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)


@given(ts=st.floats(min_value=-1e9, max_value=4e9, allow_nan=False) | st.integers(-(10**9), 4 * 10**9))
def test_a_time_is_rendered_as_datetime_renders_it_to_the_second(ts: float) -> None:
    want = datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    assert _iso(ts) == want
    assert _iso(ts) == want  # and again, from the memo


@given(value=values)
def test_a_result_is_encoded_as_json_dumps_encodes_it(value: Any) -> None:
    assert dumps(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
