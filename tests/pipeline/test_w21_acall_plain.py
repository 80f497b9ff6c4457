"""The commonest call's envelope is made as plain attributes given their class
(pipeline/_direct.py). Calls of ``rt.acall`` naming no option, some or others end as the stages end
them: events, observations (their classes and every stored field) and flow state; what its
signature refuses is refused."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
import pickle
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.errors import ConfigurationError
from actionspace.policy.labels import Label
from actionspace.types import Observation, Provenance
from tests.pipeline.test_fast import POLICIES, PRINCIPALS, ToolShape, _runtime, _view, proposals, tool_shapes

RUN = "run-plain"


def _stored(obs: Any) -> Any:
    """Every field an observation holds and its class, its provenance's likewise (wall clock aside)."""
    fields = {k: v for k, v in vars(obs).items() if k not in ("provenance", "items")}
    prov = obs.provenance
    return (
        type(obs),
        fields,
        type(prov),
        {k: v for k, v in vars(prov).items() if k != "fetched_at"},
        [_stored(i) for i in obs.items],
    )


options = st.one_of(
    st.just({}),
    st.just({"run_id": RUN}),
    st.fixed_dictionaries({"principal": st.sampled_from(list(PRINCIPALS.values()))}),
    st.fixed_dictionaries({"occurrence": st.sampled_from([0, 1, 2])}, optional={"run_id": st.just(RUN)}),
    st.fixed_dictionaries({"node_id": st.sampled_from(["n-a", "n-b"])}),
    st.fixed_dictionaries({"run_id": st.just(RUN), "fresh": st.just(False)}),
    st.fixed_dictionaries(
        {"dry_run": st.just(False), "principal": st.sampled_from(list(PRINCIPALS.values()))}
    ),
)
"""What a caller names: nothing, its run, principal, node or occurrence, or other options."""


def _play(rt: Runtime, calls: list[tuple[Any, dict[str, Any]]], user_labels: list[str]) -> dict[str, Any]:
    """The calls through ``acall`` on the runtime's default run (``RUN``)."""
    rt._default_run = run_id = rt.new_run(RUN)
    state = rt.engine.run(run_id)
    for conf in user_labels:
        state.flow.add_user_input("hello", Label(confidentiality=conf))  # type: ignore[arg-type]
    call = rt.acall

    async def play() -> list[Any]:
        return [await call(raw, **named) for raw, named in calls]

    observations = asyncio.run(play())
    view = _view(rt, run_id, observations)
    return {**view, "nodes": next(state.nodes), "stored": [_stored(o) for o in observations]}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tools=st.lists(tool_shapes, min_size=1, max_size=3, unique_by=lambda t: t.name),
    calls=st.lists(st.tuples(proposals(), options), min_size=1, max_size=10),
    policy=st.sampled_from(list(POLICIES)),
    user_labels=st.lists(st.sampled_from(["public", "internal", "secret"]), max_size=1),
)
def test_acall_ends_calls_as_the_stages_whatever_options_it_names(
    tools: list[ToolShape], calls: list[tuple[tuple[str, Any, str], dict[str, Any]]], policy: str,
    user_labels: list[str],
) -> None:  # fmt: skip
    played = [(raw, named) for (_, raw, _), named in calls]
    with _runtime(tools, policy, fast=True) as plain, _runtime(tools, policy, fast=False) as staged:
        assert _play(plain, played, user_labels) == _play(staged, played, user_labels)


_SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
    "additionalProperties": False,
}


def _entry(i: int, name: str = "add") -> str:
    arguments = json.dumps({"a": i, "b": 1})
    return json.dumps(
        {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": arguments}}
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    values=st.lists(st.integers(-(2**63), 2**63), min_size=1, max_size=8),
    conf=st.sampled_from(["public", "internal", "secret"]),
    run_label=st.sampled_from([None, "public", "internal", "secret"]),
)
def test_an_envelope_made_in_the_frame_is_an_observation_as_any_other(
    values: list[int], conf: str, run_label: str | None
) -> None:
    """The frame's observation and provenance are instances of their classes with the fields the
    stages give them (and the run label's tags where it restricts), and behave as such: equal,
    hashable, copied, pickled, replaced."""
    made: list[list[Observation]] = []
    for fast in (True, False):
        rt = Runtime("memory://")

        async def add(a: int, b: int) -> int:
            return a + b

        rt.add_tool(name="add", input_schema=_SCHEMA, fn=add, effect="none", labels={"confidentiality": conf})
        rt.engine.fast.enabled = fast
        with rt:
            run = rt.run_state()
            if run_label is not None:
                run.flow.add_user_input("hello", Label(confidentiality=run_label))  # type: ignore[arg-type]

            async def play(rt: Runtime = rt) -> list[Observation]:
                return [await rt.acall(_entry(v)) for v in values]

            made.append(asyncio.run(play()))
    direct, staged = made
    for obs, want in zip(direct, staged, strict=True):
        assert _stored(obs) == _stored(want)
        assert type(obs) is Observation and type(obs.provenance) is Provenance
        assert obs == dataclasses.replace(want, provenance=obs.provenance)
        assert hash(obs) == hash(copy.copy(obs)) == hash(pickle.loads(pickle.dumps(obs)))
        assert pickle.loads(pickle.dumps(obs)) == obs
        replaced = dataclasses.replace(obs, data=obs.data + 1)
        assert replaced.data == obs.data + 1 and replaced.provenance == obs.provenance
        with pytest.raises(dataclasses.FrozenInstanceError):
            obs.data = 1  # type: ignore[misc]
        with pytest.raises(dataclasses.FrozenInstanceError):
            obs.provenance.trust = "untrusted"  # type: ignore[misc]


def test_acall_refuses_what_its_signature_does_not_take() -> None:
    rt = Runtime("memory://")

    @rt.tool(effect="none")
    async def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    async def play() -> list[Any]:
        acall: Any = rt.acall  # called with what its signature refuses
        out = [(await acall(raw=_entry(1))).data, (await acall(_entry(2), **{})).data]
        for args, named in (((_entry(3), "run"), {}), ((_entry(4),), {"bogus": 1})):
            with pytest.raises(TypeError, match=r"Runtime\.acall\(\)"):
                await acall(*args, **named)
        with pytest.raises(TypeError):
            acall()
        with pytest.raises(TypeError):
            acall(_entry(5), raw=_entry(5))
        return out

    with rt:
        assert asyncio.run(play()) == [2, 3]
        run = rt.run_state()
        assert [e.kind for e in rt.trace.events(run.run_id)].count("dispatched") == 2  # nothing else ran


def test_a_call_without_options_on_a_closed_runtime_is_refused_as_with_options() -> None:
    rt = Runtime("memory://")

    @rt.tool(effect="none")
    async def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    async def play() -> None:
        assert (await rt.acall(_entry(1))).data == 2
        run_id = rt.run_id_of()
        rt.close()
        with pytest.raises(ConfigurationError):
            await rt.acall(_entry(2))
        with pytest.raises(ConfigurationError):
            await rt.acall(_entry(2), run_id=run_id)
        with pytest.raises(ConfigurationError):
            await rt.acall(_entry(2), run_id=run_id, fresh=False)

    asyncio.run(play())


def test_a_call_without_options_whose_tool_waits_ends_as_with_its_run_named() -> None:
    """``acall`` awaits the coroutine the frame hands back for a tool that waits."""
    rt = Runtime("memory://")

    @rt.tool(effect="none")
    async def add(a: int, b: int) -> int:
        """Add after a wait."""
        await asyncio.sleep(0)
        return a + b

    async def play() -> list[Any]:
        first = await asyncio.gather(*(rt.acall(_entry(i)) for i in range(5)))
        second = [await rt.acall(_entry(i), run_id=rt.run_id_of()) for i in range(5, 8)]
        return [o.data for o in (*first, *second)]

    with rt:
        assert asyncio.run(play()) == [i + 1 for i in range(8)]
