"""``actionspace trace import`` and numbers no store keeps as they are written.

``NaN``, ``Infinity`` (also spelled ``1e400``) and an integer longer than Python converts
(``sys.get_int_max_str_digits``) anywhere in a line refuse the file: one ``error:`` line naming
the line, exit 1, nothing imported (the lines before it neither). A stored ``NaN`` would read back
as the text ``"NaN"``; an export holding it would be no JSON other readers take.
"""

from __future__ import annotations

import io
import json
import math
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from actionspace.trace.cli import trace_app
from actionspace.trace.events import TraceEvent
from actionspace.trace.export import export_jsonl, import_jsonl
from actionspace.trace.memory import MemoryTraceStore
from actionspace.trace.sqlite import SqliteTraceStore

_HOLE = "\x00hole\x00"


def _line(seq: int, data: Any, ts: str = "1.5") -> str:
    event = {"run_id": "r", "seq": seq, "kind": "parsed", "ts": _HOLE, "call_id": None, "data": data}
    return json.dumps(event).replace(json.dumps(_HOLE), ts, 1)


def _digits(n: int) -> str:
    return "7" + "1" * (n - 1)


LIMIT = sys.get_int_max_str_digits() or 4300
HOSTILE = st.sampled_from(
    ["NaN", "Infinity", "-Infinity", "1e400", "-1E999", "1.5e309", "9" * 300 + "e10", "1" * 330 + "e-20"]
) | st.builds(
    lambda n, neg: ("-" if neg else "") + _digits(n), st.integers(LIMIT + 1, LIMIT + 3000), st.booleans()
)
PATHS = st.lists(st.one_of(st.just(None), st.text("abc", min_size=1, max_size=3)), max_size=4)
"""Where the number sits in ``data``: None a list level, text a key."""


def _placed(path: list[str | None]) -> Any:
    value: Any = _HOLE
    for step in reversed(path):
        value = [1, value] if step is None else {step: value}
    return {"x": value}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(token=HOSTILE, path=PATHS, before=st.integers(0, 3), in_ts=st.booleans())
def test_a_number_no_store_keeps_refuses_the_file_with_one_line_naming_it(
    tmp_path_factory: pytest.TempPathFactory, token: str, path: list[str | None], before: int, in_ts: bool
) -> None:
    tmp = tmp_path_factory.mktemp("imp")
    good = [_line(seq, {"n": seq}) for seq in range(before)]
    if in_ts:
        bad = _line(before, {"n": before}, ts=token)
    else:
        bad = _line(before, _placed(path)).replace(json.dumps(_HOLE), token, 1)
    file = tmp / "in.jsonl"
    file.write_text("\n".join([*good, bad, _line(before + 1, {})]) + "\n")
    db = tmp / "t.db"
    with SqliteTraceStore(db) as store:  # an existing store: what it holds stays as it was
        store.append_many([])
    result = CliRunner().invoke(trace_app, ["import", str(file), "--store", f"sqlite:///{db}"])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    said = result.stderr.strip().splitlines()
    errors = [x for x in said if x.startswith("error:")]
    assert len(errors) == 1 and errors == said[-1:], result.stderr
    assert f"line {before + 1}:" in errors[0], errors[0]
    assert "set_int_max_str_digits" not in result.stderr
    assert ("digits" in errors[0]) == token.lstrip("-").isdigit(), errors[0]
    with SqliteTraceStore(db) as store:
        assert store.events("r") == []


@pytest.mark.parametrize("token", ["NaN", "-Infinity", "1e400", _digits(LIMIT + 1)])
def test_the_library_refuses_it_before_any_batch_is_written(token: str) -> None:
    store = MemoryTraceStore()
    lines = [_line(0, {}), _line(1, {}), _line(2, {"x": [_HOLE]}).replace(json.dumps(_HOLE), token)]
    with pytest.raises(ValueError, match=r"^line 3: not JSON a store can (keep|read): "):
        import_jsonl(store, iter(lines), batch_size=1)
    assert store.events("r") == []


@settings(max_examples=30, deadline=None)
@given(
    number=st.floats(allow_nan=False, allow_infinity=False)
    | st.integers(-(10**40), 10**40)
    | st.builds(lambda n: int(_digits(n)), st.integers(LIMIT - 20, LIMIT))
)
def test_a_number_a_store_keeps_is_imported_and_exported_back_the_same(number: float) -> None:
    store = MemoryTraceStore()
    line = _line(0, {"x": [number]})
    assert import_jsonl(store, iter([line])).written == 1
    out = io.StringIO()
    export_jsonl(store, out)
    assert json.loads(out.getvalue())["data"] == {"x": [number]}


def _strict(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise AssertionError(f"{name} written: no JSON reader but Python's takes it")

    return json.loads(text, parse_constant=refuse)


@settings(max_examples=30, deadline=None)
@given(
    value=st.sampled_from([math.nan, math.inf, -math.inf]),
    path=PATHS,
)
def test_an_export_of_a_non_finite_number_is_strict_json_and_imports_again(
    value: float, path: list[str | None]
) -> None:
    source = MemoryTraceStore()  # the one store that holds the float as it was given
    data = json.loads(
        json.dumps(_placed(path)).replace(json.dumps(_HOLE), "NaN"), parse_constant=lambda _: value
    )
    source.append_many([TraceEvent(run_id="r", seq=0, kind="parsed", ts=1.0, data=data)])
    out = io.StringIO()
    assert export_jsonl(source, out) == 1
    line = _strict(out.getvalue())
    target = MemoryTraceStore()
    assert import_jsonl(target, io.StringIO(out.getvalue())).written == 1
    again = io.StringIO()
    export_jsonl(target, again)
    assert _strict(again.getvalue()) == line  # reads the same the second time
    expected = "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    assert json.dumps(line["data"]) == json.dumps(_placed(path)).replace(
        json.dumps(_HOLE), json.dumps(expected)
    )
