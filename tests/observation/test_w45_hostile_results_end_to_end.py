"""Hostile tool results through ``Runtime.acall`` and a session turn rendered for the provider: each
ends as a typed observation, and an incomplete one names an artifact that holds the whole."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pydantic
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.discovery import read_artifact_tool
from actionspace.types import Observation


def _runtime(value: Any) -> Runtime:
    rt = Runtime("memory://")
    rt.register(read_artifact_tool(rt.artifacts))

    @rt.tool(name="give", effect="read")
    def give(n: int) -> Any:
        """Give the value."""
        return value() if callable(value) else value

    return rt


def _turn(rt: Runtime, run_id: str) -> tuple[Observation, dict[str, Any]]:
    s = rt.session(run_id=run_id, provider="openai_chat")
    s.user("go")
    call = {"id": "c1", "type": "function", "function": {"name": "give", "arguments": '{"n": 1}'}}
    turn = s.handle({"role": "assistant", "content": None, "tool_calls": [call]})
    message = turn.messages[0]
    assert message["role"] == "tool" and message["tool_call_id"] == "c1"
    return turn.observations[0], message


def _read_all(rt: Runtime, ref: str, run_id: str) -> str:
    text, offset = "", 0
    while True:
        args = {"ref": ref, "offset": offset, "length": 65_536}
        obs = rt.call({"name": "read_artifact", "arguments": args}, run_id=run_id)
        assert obs.ok, obs.error
        text += str(obs.data["text"])
        offset += obs.data["length"]
        if obs.data["eof"]:
            return text


def _nested(levels: int) -> Any:
    value: Any = "bottom"
    for _ in range(levels):
        value = [value]
    return value


def test_a_deep_result_through_acall_reads_back_whole_with_read_artifact() -> None:
    with _runtime(_nested(3000)) as rt:
        obs = asyncio.run(rt.acall({"name": "give", "arguments": {"n": 1}}, run_id="deep"))
        assert obs.ok and obs.complete is False and obs.artifact_ref is not None
        assert _read_all(rt, obs.artifact_ref, "deep") == "[" * 3000 + '"bottom"' + "]" * 3000


def test_a_huge_integer_in_a_session_turn_names_an_artifact_holding_its_digits() -> None:
    with _runtime({"total": 10**5000}) as rt:
        obs, message = _turn(rt, "big")
        assert obs.ok and obs.complete is False and obs.artifact_ref is not None
        assert obs.artifact_ref in message["content"]
        assert _read_all(rt, obs.artifact_ref, "big") == '{"total":1' + "0" * 5000 + "}"


_PROBE = textwrap.dedent(
    """
    import resource, sys
    from actionspace.observation import FolderArtifactStore, MemoryArtifactStore, shape
    value = "x" * (100 << 20)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    store = FolderArtifactStore(sys.argv[2]) if sys.argv[1] == "folder" else MemoryArtifactStore()
    shaped = shape(value, artifacts=store)
    assert not shaped.complete and shaped.trimming.original_bytes == (100 << 20) + 2
    print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
    with store.open(shaped.artifact_ref) as stored:
        assert stored.read(3) == b'"xx' and stored.seek(-3, 2) and stored.read() == b'xx"'
    """
)


def test_a_100_megabyte_text_result_is_not_copied_whole_on_its_way_to_the_store(tmp_path: Path) -> None:
    grown = {}
    for kind in ("folder", "memory"):
        done = subprocess.run(
            [sys.executable, "-c", _PROBE, kind, str(tmp_path / "art")],
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
        grown[kind] = int(done.stdout.split()[-1])
    assert grown["folder"] < 40  # MB beyond the value itself: slices, never the whole
    assert grown["memory"] < 140  # the stored copy, and nothing else of its size


class _Boom:
    def __repr__(self) -> str:
        raise RuntimeError("repr")

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("eq")

    def __hash__(self) -> int:
        raise RuntimeError("hash")

    def __len__(self) -> int:
        raise RuntimeError("len")


class _Key:
    def __hash__(self) -> int:
        return 7

    def __str__(self) -> str:
        raise RuntimeError("str")

    __repr__ = __str__


class _ListBreaks(list[Any]):
    def __iter__(self) -> Any:
        raise RuntimeError("iter")

    def __len__(self) -> int:
        raise RuntimeError("len")


class _DictBreaks(dict[Any, Any]):
    def items(self) -> Any:
        raise RuntimeError("items")

    def __iter__(self) -> Any:
        raise RuntimeError("iter")


class _Model(pydantic.BaseModel):
    a: int
    b: list[str]


@dataclasses.dataclass
class _Link:
    name: str
    other: Any = None


def _dataclass_cycle() -> _Link:
    link = _Link("a")
    link.other = _Link("b", link)
    return link


def _cycle() -> Any:
    items: list[Any] = [1]
    items.append({"back": items})
    return items


def _rows() -> Any:
    yield {"row": 1}
    yield {"row": 2}


class _Text(str):
    pass


_LEAVES: dict[str, Any] = {
    "nan": lambda: float("nan"),
    "inf": lambda: float("-inf"),
    "bytes": lambda: b"\xff\x00ok",
    "set": lambda: {3, "a", None},
    "frozenset": lambda: frozenset({(1, 2)}),
    "boom": _Boom,
    "model": lambda: _Model(a=1, b=["x"]),
    "dataclass-cycle": _dataclass_cycle,
    "cycle": _cycle,
    "str-subclass": lambda: _Text("sub"),
    "int-keys": lambda: {1: "a", "1": "b", (1, 2): "t", None: "n"},
    "key-str-raises": lambda: {_Key(): 1, "ok": 2},
    "list-breaks": lambda: _ListBreaks([1]),
    "dict-breaks": lambda: _DictBreaks(a=1),
    "huge-int": lambda: -(10**4400),
    "long-text": lambda: "y" * 40_000,
    "surrogate": lambda: "\ud800",
}


def _leaf() -> st.SearchStrategy[Any]:
    return st.sampled_from(sorted(_LEAVES)).map(lambda name: _LEAVES[name]())


def _deep(pair: tuple[int, Any]) -> Any:
    levels, inner = pair
    for _ in range(levels):
        inner = {"k": inner}
    return inner


_HOSTILE = st.recursive(
    _leaf() | st.integers() | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=3) | st.integers(), inner, max_size=3)
        | st.tuples(st.integers(0, 1500), inner).map(_deep)
    ),
    max_leaves=8,
)


def _typed(obs: Observation, rt: Runtime) -> None:
    json.dumps(obs.to_dict(), allow_nan=False)
    if obs.error is not None:
        assert obs.error.category and obs.error.recovery is not None
        return
    assert obs.status == "ok"
    if obs.complete is False:
        assert obs.artifact_ref is not None and rt.artifacts.exists(obs.artifact_ref)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=_HOSTILE)
def test_any_hostile_result_ends_typed_through_acall_and_a_rendered_turn(value: Any) -> None:
    with _runtime(value) as rt:
        fast = asyncio.run(rt.acall({"name": "give", "arguments": {"n": 1}}))
        _typed(fast, rt)
        obs, message = _turn(rt, "hostile")
        _typed(obs, rt)
        assert isinstance(message["content"], str) and len(message["content"].encode()) < 40_000
        assert obs.content_hash == fast.content_hash


def test_a_generator_result_is_read_as_its_rows() -> None:
    with _runtime(_rows) as rt:
        obs, message = _turn(rt, "rows")
        assert obs.ok and obs.data == '{"row":1}\n{"row":2}\n'
        assert "row" in message["content"]
