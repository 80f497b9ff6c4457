"""Scripted models that behave like the world, driven through a session over SQLite.

Hypothesis writes the script: user turns; messages of one to four calls in each provider's shape
or in raw open-model text (Hermes, Mistral, Qwen3 XML, Kimi K2), some handed over as a
``StreamParser`` fed in pieces; the same write proposed again with its keys reordered, ``1`` as
``1.0``, ``"café"`` decomposed; ids missing, repeated within a message or taken from an earlier
turn; tool names in upper case, with a Cyrillic lookalike, a zero-width space or ``functions.``
before them; arguments cut, given a key twice, nested 5000 deep, holding a 5000-digit number or a
lone surrogate; raw text cut anywhere; a carrier that loses its answer after sending or refuses
before it; a restart of the runtime between two messages, or a second runtime on the store
taking over the conversation while the first stays open.

After every message: nothing escapes but observations; every error has a category of the
taxonomy (never ``internal``) and what the model reads next carries it and each of its recovery
steps; each call id is answered once; a ``set_counter`` result answers its own call's arguments;
the message's trace holds one ``model_output``, ends with the ``rendered`` event naming the ids
answered, and leaves no ledger entry ``accepted`` or ``dispatched``. At the end: each write ran
at most as often, in a turn, as one message of that turn proposed it.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import unicodedata
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import CATEGORIES, Runtime
from actionspace.parse import StreamParser
from actionspace.session import Provider, Session, Turn
from tests.proc import run_child

# what a scripted call may do: (tool, arguments, how its arguments text is spoiled, how its name is)
SPOILS = ["", "", "", "", "", "cut", "twice", "deep", "digits", "surrogate", "list", "doubled"]
NAMES = ["", "", "", "", "", "", "upper", "lookalike", "zero_width", "prefixed", "spaced"]
TEXT_FORMATS = ["hermes", "mistral", "qwen_xml", "kimi"]

sms_args = st.fixed_dictionaries(
    {"to": st.sampled_from(["+15550100", "+15550199"]), "text": st.sampled_from(["late", "café"])},
    optional={"copies": st.just(1)},
)
counter_args = st.fixed_dictionaries({"name": st.sampled_from(["a", "b"]), "value": st.integers(0, 2)})
calls = st.one_of(
    st.tuples(st.just("send_sms"), sms_args),
    st.tuples(st.just("set_counter"), counter_args),
    st.tuples(st.just("read_counter"), st.just({"name": "a"})),
)
call_plans = st.tuples(
    calls,
    st.sampled_from(SPOILS),
    st.sampled_from(NAMES),
    st.sampled_from(["own", "own", "own", "none", "earlier", "repeat"]),
    st.sampled_from(["", "", "", "lose", "refuse"]),  # the carrier, for a send
    st.randoms(use_true_random=False),
)
steps = st.one_of(
    st.just(("user",)),
    st.just(("restart",)),
    st.just(("beside",)),
    st.tuples(
        st.just("message"),
        st.lists(call_plans, min_size=1, max_size=4),
        st.sampled_from(["shape", "shape", "text"]),
        st.sampled_from(["", "", "", "cut", "stream"]),
        st.integers(0, 10_000),
    ),
)


class World:
    """Tools over SQLite whose side effects a table of their own counts, whatever the runtime believes."""

    def __init__(self, root: Path) -> None:
        self.outbox = root / "outbox.db"
        self.url = f"sqlite:///{root / 'rt.db'}"
        self.turn = 0
        self.faults: dict[tuple[str, str], str] = {}

    def _write(self, kind: str, a: str, b: str) -> None:
        with sqlite3.connect(self.outbox) as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS sent (n INTEGER PRIMARY KEY, kind TEXT, a TEXT, b TEXT, turn INT)"
            )
            db.execute("INSERT INTO sent (kind, a, b, turn) VALUES (?, ?, ?, ?)", (kind, a, b, self.turn))

    def sends(self) -> Counter[tuple[str, str, str, int]]:
        if not self.outbox.exists():
            return Counter()
        with sqlite3.connect(self.outbox) as db:
            rows = db.execute("SELECT kind, a, b, turn FROM sent").fetchall()
        return Counter((k, a, unicodedata.normalize("NFC", b), t) for k, a, b, t in rows)

    def runtime(self) -> Runtime:
        rt = Runtime(self.url, recover_on_start=False)

        @rt.tool(effect="external", idempotency="none", writes=["sms:{to}"])
        def send_sms(to: str, text: str, copies: int = 1) -> dict[str, Any]:
            """Send a text message."""
            fault = self.faults.pop((to, unicodedata.normalize("NFC", text)), "")
            if fault == "refuse":
                raise ConnectionRefusedError("the carrier refused the connection")
            self._write("sms", to, text)
            if fault == "lose":
                raise TimeoutError("the carrier did not answer")
            return {"sent": True, "copies": copies}

        @rt.tool(effect="write", writes=["counter:{name}"])
        def set_counter(name: str, value: int) -> dict[str, Any]:
            """Set a counter."""
            self._write("counter", name, str(value))
            return {"name": name, "value": value}

        @rt.tool(effect="read", reads=["counter:{name}"])
        def read_counter(name: str) -> dict[str, Any]:
            """Read a counter."""
            return {"name": name}

        return rt


def _arguments_text(args: dict[str, Any], spoil: str, rnd: Any) -> str:
    items = list(args.items())
    rnd.shuffle(items)
    written: dict[str, Any] = {}
    for key, value in items:
        if type(value) is int and rnd.random() < 0.4:
            value = float(value)
        elif isinstance(value, str) and rnd.random() < 0.4:
            value = unicodedata.normalize("NFD", value)
        written[key] = value
    text = json.dumps(written, ensure_ascii=rnd.random() < 0.5)
    if rnd.random() < 0.3:
        text = text.replace(", ", " ,\n ")
    spoiled = {
        "cut": lambda: text[: rnd.randrange(len(text))],
        "twice": lambda: text[:-1] + ', "to": "+15550999"}',
        "deep": lambda: text[:-1] + ', "deep": ' + "[" * 5000 + "]" * 5000 + "}",
        "digits": lambda: text[:-1] + ', "big": ' + "9" * 5000 + "}",
        "surrogate": lambda: text[:-1] + ', "s": "\\ud800"}',
        "list": lambda: f"[{text}]",
        "doubled": lambda: text + text,
    }
    return spoiled[spoil]() if spoil else text


def _name(name: str, how: str) -> str:
    return {
        "": name,
        "upper": name.upper(),
        "lookalike": name.replace("e", "\u0435", 1),
        "zero_width": name + "\u200b",
        "prefixed": "functions." + name,
        "spaced": f" {name}\n",
    }[how]


def _message(shape: str, written: list[tuple[str | None, str, str]], rnd: Any) -> Any:
    """The message of ``written`` (call id, name, arguments text) in ``shape``."""
    if shape == "openai_chat":
        entries = [
            {"type": "function", "function": {"name": n, "arguments": a}, **({"id": i} if i else {})}
            for i, n, a in written
        ]
        message = {"role": "assistant", "content": rnd.choice([None, "", "On it."]), "tool_calls": entries}
        if rnd.random() < 0.3:
            return {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}
        return message
    if shape == "openai_responses":
        items: list[dict[str, Any]] = [
            {"type": "function_call", "name": n, "arguments": a, **({"call_id": i} if i else {})}
            for i, n, a in written
        ]
        if rnd.random() < 0.3:
            text = [{"type": "output_text", "text": "On it."}]
            items.insert(0, {"type": "message", "role": "assistant", "content": text})
        return items
    if shape == "anthropic":
        blocks: list[dict[str, Any]] = [{"type": "text", "text": "On it."}] if rnd.random() < 0.5 else []
        for i, n, a in written:
            blocks.append({"type": "tool_use", "name": n, "input": _input(a), **({"id": i} if i else {})})
            if rnd.random() < 0.3:
                blocks.append({"type": "text", "text": "and"})
        return {"role": "assistant", "content": blocks, "stop_reason": "tool_use"}
    if shape == "hermes":
        return "".join(
            f'<tool_call>{{"name": {json.dumps(n)}, "arguments": {a}}}</tool_call>\n' for _, n, a in written
        )
    if shape == "mistral":
        return (
            "[TOOL_CALLS]["
            + ", ".join(f'{{"name": {json.dumps(n)}, "arguments": {a}}}' for _, n, a in written)
            + "]"
        )
    if shape == "qwen_xml":
        out = ""
        for _, n, a in written:
            args = _input(a)
            params = args.items() if isinstance(args, dict) else [("x", a)]
            out += f"<tool_call>\n<function={n}>\n"
            out += "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in params)
            out += "</function>\n</tool_call>\n"
        return out
    assert shape == "kimi"
    body = "".join(
        f"<|tool_call_begin|>functions.{n}:{k}<|tool_call_argument_begin|>{a}<|tool_call_end|>"
        for k, (_, n, a) in enumerate(written)
    )
    return f"<|tool_calls_section_begin|>{body}<|tool_calls_section_end|>"


def _input(text: str) -> Any:
    """An Anthropic ``input`` as the model wrote it: the object, else the text itself."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


def _answered(provider: Provider, messages: list[dict[str, Any]]) -> list[str]:
    if provider == "anthropic":
        return [b["tool_use_id"] for m in messages for b in m["content"] if b.get("type") == "tool_result"]
    if provider == "openai_responses":
        return [m["call_id"] for m in messages]
    return [m["tool_call_id"] for m in messages]


def _action(tool: str, args: dict[str, Any]) -> tuple[str, str, str]:
    """The side effect a valid call of ``tool`` with ``args`` writes: (kind, a, b) of the outbox."""
    if tool == "send_sms":
        return ("sms", args["to"], unicodedata.normalize("NFC", args["text"]))
    return ("counter", args["name"], str(args["value"]))


def _meant(tool: str, args: dict[str, Any], written: str, shape: str) -> tuple[str, str, str] | None:
    """The side effect the model may have meant: that of ``args``, or, for a shape that reads the
    arguments as objects (an Anthropic ``input``, Qwen3 XML parameters), with the recipient a key
    given twice made the last one."""
    if tool == "read_counter":
        return None
    read = _input(written) if shape in ("anthropic", "qwen_xml") else None
    if tool == "send_sms" and isinstance(read, dict) and isinstance(read.get("to"), str):
        return _action(tool, {**args, "to": read["to"]})
    return _action(tool, args)


def _check_turn(
    turn: Turn, provider: Provider, written: list[tuple[str | None, str, str]], events: list[Any]
) -> None:
    answered = _answered(provider, turn.messages)
    # one answer per id: a message giving one id to two calls runs none of them (duplicate_call_id)
    assert answered == list(dict.fromkeys(o.call_id for o in turn.observations))
    shown = json.dumps(turn.messages, ensure_ascii=False)
    for obs in turn.observations:
        if obs.error is None:
            continue
        assert obs.error.category in CATEGORIES and obs.error.category != "internal", obs.error
        assert obs.error.category in shown and all(step in shown for step in obs.error.recovery)
    if len(turn.observations) == len(written):
        for (_, _, args_text), obs in zip(written, turn.observations, strict=True):
            asked = _input(args_text)
            if obs.ok and obs.tool == "set_counter" and isinstance(asked, dict):
                assert (obs.data["name"], obs.data["value"]) == (asked["name"], asked["value"])
    kinds = [e.kind for e in events]
    if not turn.observations and not turn.messages:  # a plain answer (say, a text cut before its calls)
        assert not {"ledger", "observation", "rendered"} & set(kinds), kinds  # nothing ran, nothing shown
        return
    assert kinds.count("model_output") == 1 and kinds[-1] == "rendered"
    assert events[-1].data["results"] == answered
    last = {e.data["key"]: e.data.get("to") for e in events if e.kind == "ledger"}
    assert not {state for state in last.values()} & {"accepted", "dispatched"}, last


def _play(root: Path, provider: Provider, script: list[Any], handle: Callable[[Session, Any], Turn]) -> None:
    world = World(root)
    rt = world.runtime()
    beside: list[tuple[Runtime, Session]] = []
    s = rt.session(run_id="conv", provider=provider)
    s.user("text Bob, set the counters")
    world.turn = 1
    meant: dict[int, Counter[tuple[str, str, str]]] = {}
    earlier: list[str] = []
    try:
        for index, step in enumerate(script):
            if step[0] == "user":
                s.user("and now?")
                world.turn += 1
            elif step[0] == "restart":
                rt.close()
                rt = world.runtime()
                s = rt.session(run_id="conv", provider=provider)
            elif step[0] == "beside":  # another runtime takes the conversation; this one stays open
                beside.append((rt, s))
                if len(beside) > 1:
                    rt, s = beside.pop(0)
                else:
                    rt = world.runtime()
                    s = rt.session(run_id="conv", provider=provider)
            else:
                _, planned, form, delivery, cut_at = step
                written: list[tuple[str | None, str, str]] = []
                counts: Counter[tuple[str, str, str]] = Counter()
                for k, ((tool, args), spoil, how, ids, fault, rnd) in enumerate(planned):
                    text = _arguments_text(args, spoil, rnd)
                    call_id = {
                        "own": f"call_{index}_{k}",
                        "none": None,
                        "earlier": earlier[-1] if earlier else None,
                        "repeat": written[-1][0] if written else f"call_{index}_{k}",
                    }[ids]
                    written.append((call_id, _name(tool, how), text))
                    shape = provider if form == "shape" else TEXT_FORMATS[cut_at % len(TEXT_FORMATS)]
                    action = _meant(tool, args, text, shape)
                    if action is not None:
                        counts[action] += 1
                    if tool == "send_sms" and fault:
                        world.faults[(args["to"], unicodedata.normalize("NFC", args["text"]))] = fault
                shape = provider if form == "shape" else TEXT_FORMATS[cut_at % len(TEXT_FORMATS)]
                raw = _message(shape, written, planned[0][5])
                if isinstance(raw, str) and delivery == "cut":
                    raw = raw[: cut_at % (len(raw) + 1)]
                given: Any = raw
                if isinstance(raw, str) and delivery == "stream":
                    given = StreamParser()
                    for at in range(0, len(raw), 1 + cut_at % 9):
                        given.feed(raw[at : at + 1 + cut_at % 9])
                so_far = meant.setdefault(world.turn, Counter())
                for action, n in counts.items():
                    so_far[action] = max(so_far[action], n)
                before = len(rt.trace.events("conv"))
                turn = handle(s, given)
                _check_turn(turn, provider, written, rt.trace.events("conv")[before:])
                earlier += [i for i, _, _ in written if i]
                world.faults.clear()
        for (kind, a, b, turn_no), n in world.sends().items():
            assert n <= meant.get(turn_no, Counter())[(kind, a, b)], ((kind, a, b, turn_no), n, meant)
    finally:
        rt.close()
        for other, _ in beside:
            other.close()


def _sync(s: Session, given: Any) -> Turn:
    return s.handle(given)


def _async(s: Session, given: Any) -> Turn:
    return asyncio.run(s.ahandle(given))


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
    ],
)
@given(
    st.sampled_from(["openai_chat", "openai_responses", "anthropic"]),
    st.lists(steps, min_size=1, max_size=7),
    st.booleans(),
)
def test_a_worldly_model_through_a_session_never_breaks_its_promises(
    tmp_path_factory: Any, provider: Provider, script: list[Any], awaited: bool
) -> None:
    _play(tmp_path_factory.mktemp("world"), provider, script, _async if awaited else _sync)


CONTINUE = """
import json, sys, unicodedata
from actionspace import Runtime
url, provider, outbox = sys.argv[1:4]
sys.path.insert(0, sys.argv[4])
from tests.session.test_w22_world_loops import World
from pathlib import Path
world = World(Path(outbox).parent)
rt = world.runtime()
s = rt.session(run_id="conv", provider=provider)
again = [
    {"id": "z1", "type": "function", "function": {"name": "send_sms", "arguments":
        json.dumps({"text": unicodedata.normalize("NFD", "café"), "to": "+15550100", "copies": 1.0})}},
    {"id": "z2", "type": "function",
     "function": {"name": "set_counter", "arguments": '{"value": 2.0, "name": "a"}'}},
]
turn = s.handle({"role": "assistant", "content": None, "tool_calls": again})
out = [[o.status, o.error.category if o.error else None, bool(o.diagnostics.get("replayed"))]
       for o in turn.observations]
rt.close()
print(json.dumps({"out": out}), flush=True)
"""


def test_a_second_process_continuing_the_session_sends_nothing_the_first_sent(tmp_path: Path) -> None:
    world = World(tmp_path)
    rt = world.runtime()
    s = rt.session(run_id="conv", provider="anthropic")
    s.user("text Bob, set a to 2")
    world.turn = 1
    world.faults[("+15550100", "café")] = "lose"
    first = s.handle(
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "t1",
                    "name": "send_sms",
                    "input": {"to": "+15550100", "text": "café"},
                },
                {"type": "tool_use", "id": "t2", "name": "set_counter", "input": {"name": "a", "value": 2}},
            ],
        }
    )
    assert [o.error.category if o.error else o.status for o in first.observations] == ["unknown_commit", "ok"]
    rt.close()
    root = str(Path(__file__).resolve().parents[2])
    child = run_child(CONTINUE, world.url, "openai_chat", str(world.outbox), root)
    # the lost send is still unknown and never sent again; the committed write is replayed
    assert child["out"] == [["error", "unknown_commit", False], ["ok", None, True]]
    assert sum(world.sends().values()) == 2
