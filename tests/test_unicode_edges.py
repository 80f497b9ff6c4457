"""Text a store cannot hold, from every edge: the model, the tools, the user, a tool's schema.

A Python string may hold unpaired surrogates (``os.fsdecode`` makes them of a file name's
undecodable bytes; a model that cuts an emoji between two tokens emits half of its JSON escape)
and U+0000. SQLite's driver refuses the first, PostgreSQL both. Before, one such string in a
tool's result, a call id or the user's words made every later call of the run raise
``UnicodeEncodeError`` on SQLite and PostgreSQL, and the trace lost the rows written with it; in
a proposal's arguments it reached the tool, or failed as ``internal`` for a side-effecting tool.
An integer beyond 2**53 in a write tool's arguments, or in a tool's schema (an int64 bound),
failed the same way: RFC 8785 cannot write it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime, ToolCall
from actionspace.session import Session
from tests.pg import STORES, store_url
from tests.text_strategies import any_text

LONE = "\ud83d"  # the first half of 😀's UTF-16 escape, as a model cut between tokens emits it
UNDECODABLE = os.fsdecode(b"caf\xe9.txt")  # "caf\udce9.txt": a Latin-1 file name on a UTF-8 system
REPLACEMENT = "\ufffd"


@pytest.fixture(params=STORES)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from store_url(request, tmp_path)


def _runtime(url: str, sent: list[Any]) -> Runtime:
    rt = Runtime(url)

    @rt.tool(effect="none")
    def echo(text: str) -> str:
        """Say it back."""
        sent.append(text)
        return text

    @rt.tool(effect="read")
    def listing(folder: str) -> list[str]:
        """The names in a folder, as the os module decodes them."""
        return [UNDECODABLE, "nul\x00byte", "plain"]

    @rt.tool(effect="write")
    def put(key: str, value: int) -> int:
        """Store a value."""
        sent.append((key, value))
        return value

    return rt


def _entry(name: str, arguments: str, call_id: str = "c1") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _turn(s: Session, *entries: dict[str, Any]) -> list[tuple[str, str | None]]:
    turn = s.handle({"role": "assistant", "content": None, "tool_calls": list(entries)})
    return [(o.status, o.error.category if o.error else None) for o in turn.observations]


def _stored(url: str) -> bool:
    return not url.startswith("memory")


def test_a_result_naming_an_undecodable_file_is_kept_and_the_run_goes_on(url: str) -> None:
    sent: list[Any] = []
    rt = _runtime(url, sent)

    @rt.tool(effect="write")
    def rename(name: str) -> dict[str, str]:
        """Rename a file; answers its old name as the os module decodes it."""
        sent.append(name)
        return {"old": UNDECODABLE, "new": name}

    s = rt.session()
    s.user("list the folder")
    assert _turn(s, _entry("listing", '{"folder":"."}')) == [("ok", None)]
    # every later call of the run, and the user's next words, go on as before
    assert _turn(s, _entry("echo", '{"text":"after"}', "c2")) == [("ok", None)]
    s.user("and again")
    first = s.handle({"role": "assistant", "tool_calls": [_entry("rename", '{"name":"cafe.txt"}', "c3")]})
    assert first.observations[0].data == {"old": UNDECODABLE, "new": "cafe.txt"}
    # proposed again: the ledger's recorded outcome answers, as the store kept it
    replayed = s.handle({"role": "assistant", "tool_calls": [_entry("rename", '{"name":"cafe.txt"}', "c4")]})
    kept = UNDECODABLE if not url.startswith("postgresql") else "caf" + REPLACEMENT + ".txt"
    assert replayed.observations[0].data == {"old": kept, "new": "cafe.txt"}
    assert sent == ["after", "cafe.txt"]
    kinds = [e.kind for e in rt.trace.events(s.run_id)]
    # none lost: each output's observation, the replayed one's included
    assert kinds.count("model_output") == 4 and kinds.count("observation") == 4, kinds
    run = s.run_id
    rt.close()
    if _stored(url):  # another process continues the run from its saved state
        again = _runtime(url, [])
        continued = Session(again, run, "openai_chat", None, None)
        assert _turn(continued, _entry("echo", '{"text":"y"}', "c5")) == [("ok", None)]
        again.close()


@pytest.mark.parametrize("text", [f"hi {LONE} there", "hi \x00 there"])
def test_the_users_words_are_kept_whatever_they_hold(url: str, text: str) -> None:
    rt = _runtime(url, [])
    s = rt.session()
    s.user(text)
    assert _turn(s, _entry("echo", '{"text":"x"}')) == [("ok", None)]
    run = s.run_id
    rt.close()
    if not _stored(url):
        return
    again = _runtime(url, [])
    # another process continues the run: its snapshot and the user's words load
    continued = Session(again, run, "openai_chat", None, None)
    assert _turn(continued, _entry("echo", '{"text":"y"}', "c2")) == [("ok", None)]
    saved = again.engine.runs.run_states.load(run)
    assert saved is not None and len(saved["user_texts"]) == 1
    assert saved["user_texts"][0].replace(REPLACEMENT, "?") in {"hi ? there", text}
    again.close()


@pytest.mark.parametrize("call_id", [f"call_{LONE}", "call_\x00"])
def test_a_call_id_or_a_name_holding_such_text_is_answered_and_traced(url: str, call_id: str) -> None:
    rt = _runtime(url, [])
    s = rt.session()
    turn = s.handle({"role": "assistant", "tool_calls": [_entry("echo", '{"text":"x"}', call_id)]})
    assert [m["tool_call_id"] for m in turn.messages] == [call_id]  # answered under its own id
    assert [o.status for o in turn.observations] == ["ok"]
    assert _turn(s, _entry(f"ec{LONE}ho", '{"text":"x"}', "c2")) == [("error", "unknown_tool")]
    assert _turn(s, _entry("echo", '{"text":"z"}', "c3")) == [("ok", None)]
    kinds = [e.kind for e in rt.trace.events(s.run_id)]
    assert kinds.count("observation") == 3
    rt.close()


ARGUMENTS = {
    "surrogate value": '{"text":"a\\ud83d"}',
    "surrogate key": '{"text":"a","\\udce9":1}',
    "nul value": '{"text":"a\\u0000b"}',
    "nested": '{"text":"a","more":[{"deep":"\\udfff"}]}',
}


@pytest.mark.parametrize("arguments", ARGUMENTS.values(), ids=ARGUMENTS.keys())
@pytest.mark.parametrize("tool", ["echo", "put"])
def test_arguments_holding_such_text_are_refused_before_the_tool(url: str, tool: str, arguments: str) -> None:
    sent: list[Any] = []
    rt = _runtime(url, sent)
    if tool == "put":
        arguments = arguments.replace('"text"', '"key"').replace("}", ',"value":1}', 1)
    s = rt.session()
    assert _turn(s, _entry(tool, arguments)) == [("error", "invalid_arguments")]
    # the same as one of three calls of a message, as a ToolCall, and through acall
    parsed = json.loads(arguments)
    three = [
        _entry("echo", '{"text":"ok"}', "a"),
        _entry(tool, arguments, "b"),
        _entry("echo", '{"text":"k"}', "c"),
    ]
    assert _turn(s, *three) == [("ok", None), ("error", "invalid_arguments"), ("ok", None)]
    obs = rt.call(ToolCall(name=tool, arguments=parsed), run_id=s.run_id)
    assert obs.error is not None and obs.error.category == "invalid_arguments"
    assert obs.error.field_errors and obs.error.field_errors[0].path.startswith("/")
    assert sent == ["ok", "k"]  # the refused calls reached no tool
    assert rt.ledger.list() == []  # and wrote no ledger entry
    rt.close()


def test_a_plan_node_holding_such_text_is_refused_and_its_siblings_run() -> None:
    sent: list[Any] = []
    rt = _runtime("memory://", sent)
    result = rt.run_plan(
        {
            "nodes": [
                {"id": "a", "tool": "echo", "arguments": {"text": "fine"}},
                {"id": "b", "tool": "echo", "arguments": {"text": f"half {LONE}"}},
            ]
        }
    )
    got = {node: (o.status, o.error.category if o.error else None) for node, o in result.nodes.items()}
    assert got == {"a": ("ok", None), "b": ("error", "invalid_arguments")}
    assert sent == ["fine"]


def test_a_schema_with_a_pattern_refuses_such_text_as_invalid_arguments() -> None:
    # the schema's checker cannot even read such a string (it raised UnicodeEncodeError: internal)
    rt = Runtime("memory://")
    schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]+$"}}}
    rt.add_tool(name="lookup", input_schema=schema, fn=lambda code: code, effect="none")
    obs = rt.call(_entry("lookup", '{"code":"AB\\udc80"}'))
    assert obs.error is not None and obs.error.category == "invalid_arguments"


BIG = 2**62 + 1  # a 64-bit id: exact as a Python int, beyond what RFC 8785 writes


def test_a_write_tool_takes_a_64_bit_integer_once(url: str) -> None:
    sent: list[Any] = []
    rt = _runtime(url, sent)
    s = rt.session()
    s.user("store it")
    call = _entry("put", json.dumps({"key": "id", "value": BIG}))
    assert _turn(s, call) == [("ok", None)]
    assert _turn(s, {**call, "id": "c2"}) == [("ok", None)]  # the same action again: replayed
    assert sent == [("id", BIG)]
    rt.close()


def test_a_tool_schema_bounded_by_int64_registers_and_checks() -> None:
    rt = Runtime("memory://")
    schema = {"type": "object", "properties": {"id": {"type": "integer", "minimum": 0, "maximum": 2**63 - 1}}}
    rt.add_tool(name="get", input_schema=schema, fn=lambda id: id, effect="write")
    assert rt.call(_entry("get", json.dumps({"id": BIG}))).data == BIG
    refused = rt.call(_entry("get", json.dumps({"id": 2**63}), "c2"))
    assert refused.error is not None and refused.error.category == "invalid_arguments"


# -- properties ----------------------------------------------------------------------------


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=any_text, extra=st.none() | any_text, call_id=any_text, words=any_text)
def test_any_text_in_any_place_ends_typed_and_traced_on_sqlite(
    tmp_path_factory: pytest.TempPathFactory, value: str, extra: str | None, call_id: str, words: str
) -> None:
    url = f"sqlite:///{tmp_path_factory.mktemp('u') / 'a.db'}"
    sent: list[Any] = []
    rt = _runtime(url, sent)
    s = rt.session()
    s.user(words)
    arguments = {"text": value} if extra is None else {"text": value, extra: 1}
    turn = s.handle(
        {"role": "assistant", "tool_calls": [_entry("echo", json.dumps(arguments), call_id or "c")]}
    )
    (obs,) = turn.observations
    sent_as = json.loads(json.dumps(arguments))  # JSON reads a high and a low surrogate as one character
    accepted = (
        not any(_unfit(t) for t in sent_as) and not _unfit(sent_as["text"]) and list(sent_as) == ["text"]
    )
    assert (obs.status, obs.error.category if obs.error else None) == (
        ("ok", None) if accepted else ("error", "invalid_arguments")
    )
    assert sent == ([sent_as["text"]] if accepted else [])
    assert _turn(s, _entry("echo", '{"text":"next"}', "n")) == [("ok", None)]
    kinds = [e.kind for e in rt.trace.events(s.run_id)]
    assert kinds.count("observation") == 2
    rt.close()


def _unfit(text: str) -> bool:
    return "\x00" in text or any(0xD800 <= ord(c) <= 0xDFFF for c in text)


# -- what leaves: the model's next request, a file, a console, an HTTP answer, a span ------


def _run_with_undecodable_text(url: str) -> tuple[Runtime, str]:
    rt = _runtime(url, [])
    s = rt.session()
    s.user("list it")
    _turn(s, _entry("listing", '{"folder":"."}'))
    _turn(s, _entry(f"ls{LONE}", "{}", "c2"))  # an unknown name, echoed in the error's message
    return rt, s.run_id


@pytest.mark.parametrize("provider", ["openai_chat", "anthropic", "openai_responses"])
def test_what_the_model_reads_next_encodes_as_utf8(provider: str) -> None:
    rt = _runtime("memory://", [])
    s = rt.session(provider=provider)  # type: ignore[arg-type]
    if provider == "openai_chat":
        message: Any = {"role": "assistant", "tool_calls": [_entry("listing", '{"folder":"."}')]}
    elif provider == "anthropic":
        message = {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "c1", "name": "listing", "input": {"folder": "."}}],
        }
    else:
        message = [
            {"type": "function_call", "call_id": "c1", "name": "listing", "arguments": '{"folder":"."}'}
        ]
    turn = s.handle(message)
    assert [o.data for o in turn.observations] == [[UNDECODABLE, "nul\x00byte", "plain"]]
    # the request that takes the results to the model (httpx writes JSON as UTF-8)
    body = json.dumps(turn.messages, ensure_ascii=False).encode("utf-8")
    assert b"caf\\\\udce9.txt" in body  # the model reads the escape: nothing lost


def test_a_trace_with_such_text_exports_imports_and_shows(tmp_path: Path) -> None:
    from actionspace.trace.export import export_jsonl, import_jsonl
    from actionspace.trace.memory import MemoryTraceStore

    url = f"sqlite:///{tmp_path / 'a.db'}"
    rt, run = _run_with_undecodable_text(url)
    path = tmp_path / "run.jsonl"
    with path.open("w", encoding="utf-8") as out:
        written = export_jsonl(rt.trace, out, run_id=run)
    copy = MemoryTraceStore()
    with path.open(encoding="utf-8") as lines:
        assert import_jsonl(copy, lines).written == written
    assert [e.data for e in copy.events(run)] == [e.data for e in rt.trace.events(run)]
    rt.close()
    # the command as a user runs it (stdout a pipe, UTF-8 strict)
    shown = subprocess.run(
        [
            sys.executable,
            "-c",
            "from actionspace.cli import main; main()",
            "trace",
            "show",
            run,
            "--store",
            url,
        ],
        capture_output=True,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
    )
    assert shown.returncode == 0, shown.stderr.decode(errors="replace")
    assert b"\\udce9" in shown.stdout or b"\\ud83d" in shown.stdout


def test_the_api_answers_a_run_a_ledger_and_a_trace_holding_such_text() -> None:
    from tests.service.apptools import bearer, served

    admin = bearer("admin-token")
    with served() as (client, rt, *_):
        rt.add_tool(
            name="rename",
            input_schema={"type": "object", "properties": {"name": {"type": "string"}}},
            fn=lambda name: {"old": UNDECODABLE, "new": name},
            effect="write",
        )
        run = rt.new_run("r-text")
        assert rt.call({"name": "rename", "arguments": {"name": "x"}}, run_id=run).status == "ok"
        assert rt.call({"name": f"nope{LONE}", "arguments": {}}, run_id=run).status == "error"
        for path in (f"/api/runs/{run}/events", f"/api/runs/{run}", "/api/ledger"):
            answer = client.get(path, headers=admin)
            assert answer.status_code == 200, (path, answer.text)
        ledger = client.get("/api/ledger", headers=admin).json()
        assert ledger[0]["observation"]["data"]["old"] == "caf" + REPLACEMENT + ".txt"


def test_spans_carry_such_text_as_utf8() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from actionspace.trace.otel import export_run

    rt, run = _run_with_undecodable_text("memory://")
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    export_run(rt.trace, run, tracer_provider=provider)
    texts = [
        value
        for span in exporter.get_finished_spans()
        for attrs in [span.attributes or {}, *[e.attributes or {} for e in span.events]]
        for value in attrs.values()
        if isinstance(value, str)
    ]
    assert any(REPLACEMENT in t for t in texts)  # the unknown name, in its error's message
    for text in texts:
        text.encode("utf-8")  # what an OTLP exporter does to every string


@pytest.mark.parametrize("node_id", [f"a{LONE}", "b\x00"])
def test_a_plan_node_id_holding_such_text_is_a_malformed_plan(url: str, node_id: str) -> None:
    # a node id names the node's ledger entry and its calls in the trace; it was `internal` before
    sent: list[Any] = []
    rt = _runtime(url, sent)
    nodes = [{"id": node_id, "tool": "put", "arguments": {"key": "k", "value": 1}}]
    result = rt.run_plan(
        {"nodes": [*nodes, {"id": "b", "tool": "put", "arguments": {"key": "j", "value": 2}}]}
    )
    assert result.error is not None and result.error.category == "invalid_arguments"
    assert [e.path for e in result.error.field_errors] == ["/nodes/0/id"]
    assert sent == [] and rt.ledger.list() == []
    rt.close()
