"""A model nesting models past the depth a dump reaches (pydantic refuses to dump it) is read field by
field, and checked for a dump once: each model on its deepest path used to be checked again, each
check walking that path down to the recursion limit, so a chain of a few thousand models cost
millions of steps (a chain of 10,000 took 78 s in ``whole_json``). The tests count the collector
traversals the checks make, never time."""

from __future__ import annotations

import gc
import json
from typing import Any

import pytest
from pydantic import BaseModel

import actionspace._encoder as encoder
from actionspace._canonical import dumps_plain, normalize_checked
from actionspace._json_values import whole_json


class Link(BaseModel):
    child: Any = None
    at: int = 0


def _chain(levels: int, bottom: Any = None) -> Link:
    value = Link(child=bottom)
    for at in range(levels):
        value = Link(child=value, at=at)
    return value


def _counted(patched: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    real = gc.get_referents

    def counting(*parts: Any) -> list[Any]:
        calls[0] += 1
        return real(*parts)

    patched.setattr(encoder, "get_referents", counting)
    return calls


def test_whole_json_of_a_chain_of_600_models_checks_its_dump_a_bounded_number_of_times() -> None:
    value = _chain(600, bottom={"end": True})
    with pytest.MonkeyPatch.context() as patched:
        calls = _counted(patched)
        text = "".join(whole_json(value))
    assert calls[0] < 5_000  # one walk down to the recursion limit, and the bottom's few checks
    read = json.loads(text)
    for at in reversed(range(600)):  # every level kept, in order, field by field
        assert read["at"] == at
        read = read["child"]
    assert read == {"at": 0, "child": {"end": True}}


def test_normalize_of_a_chain_of_600_models_checks_its_dump_once() -> None:
    value = _chain(600)
    with pytest.MonkeyPatch.context() as patched:
        calls = _counted(patched)
        plain, cut = normalize_checked(value)
    assert calls[0] < 5_000
    assert cut and "<nested too deep>" in dumps_plain(plain)
    assert plain["at"] == 599 and plain["child"]["at"] == 598


def test_models_beside_a_model_too_deep_to_dump_are_still_dumped() -> None:
    class Shown(BaseModel):
        when: Any

        def model_dump(self, **kwargs: Any) -> Any:  # what only a dump writes
            return {"dumped": True}

    value = [_chain(600), Shown(when=1), {"k": Shown(when=2)}]
    read = json.loads("".join(whole_json(value)))
    assert read[1:] == [{"dumped": True}, {"k": {"dumped": True}}]
    plain, _ = normalize_checked(value)
    assert plain[1:] == [{"dumped": True}, {"k": {"dumped": True}}]
