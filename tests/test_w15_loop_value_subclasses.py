"""Arguments a Python caller hands over as objects (an SDK's parsed message, its own ``ToolCall``)
may hold a ``str`` or ``int`` of a subclass (``numpy.str_``, a library's tagged string). The
schema checker refuses to read such a value where the schema types it, and such a key anywhere:
the call ended ``internal`` ("actionspace failed while handling this call: ValueError:
Unsupported type"), as a bug of the runtime's, instead of the caller's ``invalid_arguments``
naming the field. Enum members (``StrEnum``, ``IntEnum``) are read as their value and still run."""

from __future__ import annotations

import enum
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import ToolCall
from actionspace.session import Provider
from tests.session.w47_world import anthropic, sends, world


class Tagged(str):
    """A string a library tagged with a type of its own."""


class Count(int):
    """An integer a library tagged with a type of its own."""


class Colour(enum.StrEnum):
    RED = "red"


class Level(enum.IntEnum):
    ONE = 1


def _message(provider: Provider, arguments: dict[str, Any]) -> Any:
    if provider == "anthropic":
        return anthropic(("toolu_1", "set_counter", arguments))
    return ToolCall(name="set_counter", arguments=arguments, id="call_1")


def _refused(obs: Any, path: str) -> None:
    assert obs.error is not None and obs.error.category == "invalid_arguments", obs.error
    assert obs.error.recovery
    assert [f.path for f in obs.error.field_errors] == [path]
    said = obs.error.field_errors[0].message
    assert "Tagged" in said or "Count" in said
    assert "not a JSON value" in said or "has a key that is not a string" in said
    json.dumps(obs.to_dict())


HOSTILE = [
    ({"name": Tagged("x"), "value": 1}, "/name"),
    ({"name": "x", "value": Count(1)}, "/value"),
    ({Tagged("name"): "x", "value": 1}, ""),
    ({"name": "x", "value": 1, "note": {Tagged("k"): 1}}, "/note"),
]


@pytest.mark.parametrize("provider", ["anthropic", "openai_chat"])
@pytest.mark.parametrize(("arguments", "path"), HOSTILE)
def test_a_value_of_a_str_or_int_subclass_is_invalid_arguments_and_nothing_is_written(
    tmp_path: Path, provider: Provider, arguments: dict[str, Any], path: str
) -> None:
    outbox = tmp_path / "outbox.db"
    rt = world("memory://", outbox)
    s = rt.session(run_id="conv-1", provider=provider)
    s.user("set x to 1")
    for _ in range(2):  # the second time the tool's checks are compiled and take the precompiled path
        (obs,) = s.handle(_message(provider, arguments)).observations
        _refused(obs, path)
    assert sends(outbox) == []
    rt.close()


def test_enum_members_are_read_as_their_values_and_run(tmp_path: Path) -> None:
    outbox = tmp_path / "outbox.db"
    rt = world("memory://", outbox)
    s = rt.session(run_id="conv-1", provider="anthropic")
    s.user("set red to 1")
    (obs,) = s.handle(_message("anthropic", {"name": Colour.RED, "value": Level.ONE})).observations
    assert obs.status == "ok"
    assert sends(outbox) == [("counter:red", "1")]
    rt.close()


_SUBCLASSED = st.one_of(st.text(max_size=8).map(Tagged), st.integers(-5, 5).map(Count))


@settings(max_examples=60, deadline=None)
@given(
    where=st.sampled_from(["name", "value", "extra", "nested", "key"]),
    value=_SUBCLASSED,
)
def test_a_subclassed_value_anywhere_ends_typed(where: str, value: Any) -> None:
    rt = world("memory://", Path("/nonexistent/never-written.db"))
    arguments: dict[str, Any] = {"name": "x", "value": 1}
    if where == "key":
        arguments["note"] = {Tagged(str(value)): 1}
    elif where == "nested":
        arguments["note"] = [[value]]
    elif where == "extra":
        arguments["note"] = value
    else:
        arguments[where] = value
    s = rt.session(run_id="conv-1", provider="anthropic")
    s.user("set x")
    (obs,) = s.handle(_message("anthropic", arguments)).observations
    assert obs.error is not None and obs.error.category == "invalid_arguments" and obs.error.recovery
    rt.close()
