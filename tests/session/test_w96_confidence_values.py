"""A confidence handed to ``Session.handle`` that is no number within [0, 1] (NaN, 1.5, -0.1, the
text ``"0.9"``, ``True``, a mapping holding one, a mapping keyed by something other than call id
text) is the developer's mistake: ``handle`` and ``ahandle`` raise ConfigurationError before
anything runs or is recorded, gate or no gate, instead of answering each call ``internal`` ("report
this") as if actionspace had failed. Every number within [0, 1], given whole or per call id, is
taken as before."""

from __future__ import annotations

import asyncio
import json
import math
from fractions import Fraction
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.errors import ConfigurationError
from actionspace.evaluation.calibration import ThresholdPolicy
from actionspace.session import Session


class _Opaque:
    """An object that is no number (its repr is stable, as test ids must be)."""

    def __repr__(self) -> str:
        return "opaque"


WRONG: list[Any] = [
    math.nan,
    math.inf,
    -math.inf,
    1.5,
    -0.1,
    2,
    "0.9",
    True,
    False,
    b"1",
    [0.9],
    _Opaque(),
    {"c0": math.nan},
    {"c0": 1.01},
    {"c0": "high"},
    {"c0": True},
    {0: 0.9},
]
RIGHT: list[Any] = [0, 1, 0.0, 1.0, 0.5, Fraction(1, 3), 5e-324, {"c0": 0.99}, {"c0": None}, {}, None]


def _message() -> dict[str, Any]:
    call = {
        "id": "c0",
        "type": "function",
        "function": {"name": "archive", "arguments": json.dumps({"x": "a"})},
    }
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def _session(ran: list[str], gated: bool) -> tuple[Runtime, Session]:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="write")
    def archive(x: str) -> str:
        """Archive one item."""
        ran.append(x)
        return x

    s = rt.session("gated" if gated else "free")
    if gated:
        s.gate = ThresholdPolicy(read=0.0, write=0.0, external=0.0)  # every number within [0, 1] runs
    s.user("archive a")
    return rt, s


@pytest.mark.parametrize("gated", [True, False])
@pytest.mark.parametrize("confidence", WRONG, ids=repr)
def test_a_confidence_that_is_no_number_within_zero_and_one_is_raised_and_nothing_runs(
    confidence: Any, gated: bool
) -> None:
    ran: list[str] = []
    rt, s = _session(ran, gated)
    before = len(rt.trace.events(s.run_id))
    with pytest.raises(ConfigurationError, match="confidence"):
        s.handle(_message(), confidence=confidence)
    with pytest.raises(ConfigurationError, match="confidence"):
        asyncio.run(s.ahandle(_message(), confidence=confidence))
    assert ran == []
    assert len(rt.trace.events(s.run_id)) == before  # the message was not taken in
    rt.close()


@pytest.mark.parametrize("gated", [True, False])
@pytest.mark.parametrize("confidence", RIGHT, ids=repr)
def test_every_number_within_zero_and_one_is_taken(confidence: Any, gated: bool) -> None:
    ran: list[str] = []
    rt, s = _session(ran, gated)
    (obs,) = s.handle(_message(), confidence=confidence).observations
    assert obs.status == "ok" and ran == ["a"]
    (again,) = asyncio.run(s.ahandle(_message(), confidence=confidence)).observations
    assert again.status == "ok" and again.diagnostics.get("replayed") and ran == ["a"]
    rt.close()
