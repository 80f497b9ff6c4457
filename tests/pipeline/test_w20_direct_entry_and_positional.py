"""The one-frame path (pipeline/_direct.py) checks a precompiled entry whole once per value of
``actionspace._epoch.EPOCH`` and passes plain arguments by position when their names are the
tool function's first parameters (``Entry.positional``). Neither may change how a call ends:

- every change an entry was decided from, made between two calls or by the tool during a call
  (the flow policy, a stage, a guard, a new version, a retired one, another offer, disclosure, a
  cursor key, the same offer again, a dropped version, the precompiled path switched off), leaves
  the calls after it as the stages alone end them;
- a tool whose parameters are the schema's names in another order, positional-only, keyword-only,
  behind ``**kwargs`` or followed by defaulted ones gets each value under its own name;
- :func:`positional_of` says yes only where binding by position binds as binding by name does.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from actionspace import Runtime
from actionspace._epoch import EPOCH
from actionspace.pipeline._entry import positional_of
from actionspace.policy.principal import Principal
from tests.pipeline.test_fast import _view
from tests.plan.test_w16_kept_entry import CHANGES, SCHEMA, SECRET, _change

WHO = Principal(id="p", scopes=("none:*",))
MORE = ("same_offer", "drop", "switched_off")


def _raw(name: str, args: dict[str, Any], call_id: str) -> str:
    arguments = json.dumps(args)
    return json.dumps({"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}})


def _more(rt: Runtime, run_id: str, change: str) -> None:
    if change == "same_offer":  # the run's resolutions dropped, the pins as they were: no move
        rt.offer(["secret", "other"], run_id=run_id)
    elif change == "drop":  # the catalog's generation moves without the counter
        rt.catalog.retire("other@1")
        rt.catalog.drop("other@1")
    elif change == "switched_off":
        rt.engine.fast.enabled = False
    else:
        _change(rt, run_id, change)


def _played(fast: bool, change: str, at: int, offered: bool) -> tuple[Any, ...]:
    """Eight calls of ``secret`` on one run; the ``at``-th makes ``change`` during its first step
    (``at`` 0: between the third and the fourth call). The view of the run, and whether the
    one-frame path had checked ``secret``'s entry at the counter's value before the change."""
    rt = Runtime("memory://", recover_on_start=False)
    rt.engine.fast.enabled = fast
    run: list[str] = []
    count = [0]

    async def secret(x: int) -> int:
        count[0] += 1
        if count[0] == at:
            _more(rt, run[0], change)
        return x * 3

    rt.add_tool(name="secret", input_schema=SCHEMA, fn=secret, effect="none", version="1", labels=SECRET)
    rt.add_tool(name="other", input_schema=SCHEMA, fn=lambda x: x + 1, effect="none", version="1")
    stamped = False
    with rt:
        run_id = rt.new_run("run-direct-epoch", principal=WHO)
        run.append(run_id)
        if offered:
            rt.offer(["secret", "other"], run_id=run_id)

        async def play() -> list[Any]:
            nonlocal stamped
            out = []
            for i in range(8):
                if i == 3:
                    entry = rt.engine.fast._entries.get((id(rt.engine.run(run_id)), "secret"))
                    stamped = entry is not None and entry.checked == EPOCH[0]
                    if at == 0:
                        _more(rt, run_id, change)
                out.append(await rt.acall(_raw("secret", {"x": i}, f"call_{i}"), run_id=run_id))
            return out

        observations = asyncio.run(play())
        view = _view(rt, run_id, observations)
    return view, stamped


@pytest.mark.parametrize(
    ("change", "offered"),
    [(c, o) for c in CHANGES + MORE for o in (False, True) if o or c != "same_offer"],
)
@pytest.mark.parametrize("at", [0, 5])
def test_every_change_an_entry_was_decided_from_is_seen_by_the_next_call(
    change: str, at: int, offered: bool
) -> None:
    direct, stamped = _played(True, change, at, offered)
    staged, _ = _played(False, change, at, offered)
    assert stamped  # the calls before the change took the checked entry as it was
    assert direct == staged


_SCHEMA_AB = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
    "additionalProperties": False,
}
_SIGNATURES = {
    "in_order": "a, b",
    "reversed": "b, a",
    "positional_only": "a, /, b",
    "keyword_only": "*, a, b",
    "kwargs": "**kw",
    "more_after": "a, b, c=7",
    "mixed": "a, *, b",
    "var_positional": "a, b, *rest",
}


def _tool(signature: str) -> Any:
    """An async tool whose result tells which value reached which name."""
    body = "kw['a'] * 1000 + kw['b']" if signature == "**kw" else "a * 1000 + b"
    if "c=7" in signature:
        body += " + c"
    namespace: dict[str, Any] = {}
    exec(f"async def tool({signature}):\n    return {body}\n", namespace)
    return namespace["tool"]


def _calls_of(shape: str, fast: bool, values: list[tuple[int, int]], swap: list[bool]) -> Any:
    rt = Runtime("memory://", recover_on_start=False)
    rt.engine.fast.enabled = fast
    rt.add_tool(name="t", input_schema=_SCHEMA_AB, fn=_tool(_SIGNATURES[shape]), effect="none")
    with rt:
        run_id = rt.new_run("run-positional")

        async def play() -> list[Any]:
            out = []
            for i, ((a, b), other) in enumerate(zip(values, swap, strict=True)):
                args = {"b": b, "a": a} if other else {"a": a, "b": b}
                out.append(await rt.acall(_raw("t", args, f"call_{i}"), run_id=run_id))
            return out

        observations = asyncio.run(play())
        view = _view(rt, run_id, observations)
        entry = rt.engine.fast._entries.get((id(rt.engine.run(run_id)), "t"))
    return view, None if entry is None else entry.positional


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shape=st.sampled_from(sorted(_SIGNATURES)),
    values=st.lists(st.tuples(st.integers(-50, 50), st.integers(-50, 50)), min_size=3, max_size=6),
    data=st.data(),
)
def test_plain_arguments_reach_each_parameter_by_its_name(
    shape: str, values: list[tuple[int, int]], data: st.DataObject
) -> None:
    swap = data.draw(st.lists(st.booleans(), min_size=len(values), max_size=len(values)))
    direct, positional = _calls_of(shape, True, values, swap)
    staged, _ = _calls_of(shape, False, values, swap)
    assert direct == staged
    assert positional == (shape in ("in_order", "more_after", "var_positional"))


_NAMES = ("a", "b", "c", "d")


@st.composite
def signatures(draw: st.DrawFn) -> str:
    """A function's parameter list over a few names: positional-only ones, then plain ones (the
    last few defaulted), perhaps ``*args``, keyword-only ones, perhaps ``**kwargs``."""
    names = list(draw(st.permutations(_NAMES))[: draw(st.integers(0, 4))])
    cut = sorted(draw(st.lists(st.integers(0, len(names)), min_size=3, max_size=3)))
    posonly, positional, kwonly = names[: cut[0]], names[cut[0] : cut[2]], names[cut[2] :]
    defaults = cut[2] - cut[1]  # the last ones of the positional names
    parts = list(posonly) + (["/"] if posonly else [])
    parts += [n if i < len(positional) - defaults else f"{n}=0" for i, n in enumerate(positional)]
    star: bool = draw(st.booleans())
    if kwonly or star:
        parts.append("*rest" if draw(st.booleans()) else "*")
        if parts[-1] == "*" and not kwonly:
            parts.pop()
    parts += kwonly
    if draw(st.booleans()):
        parts.append("**kw")
    return ", ".join(parts)


@settings(max_examples=300, deadline=None)
@given(signature=signatures(), data=st.data())
def test_positional_of_says_yes_only_where_position_binds_as_name(
    signature: str, data: st.DataObject
) -> None:
    namespace: dict[str, Any] = {}
    try:
        exec(f"def fn({signature}):\n    pass\n", namespace)
    except SyntaxError:
        return  # a parameter list Python refuses: no tool has it
    fn = namespace["fn"]
    names = data.draw(st.permutations(_NAMES))[: data.draw(st.integers(0, 4))]
    plain = tuple((name, int) for name in names)
    values = list(range(1, len(names) + 1))
    sig = inspect.signature(fn)
    try:
        by_name = sig.bind(**dict(zip(names, values, strict=True))).arguments
    except TypeError:
        by_name = None
    if positional_of(fn, plain):
        assert (
            sig.bind_partial(*values).arguments
            == sig.bind_partial(**dict(zip(names, values, strict=True))).arguments
        )
        if by_name is not None:
            assert sig.bind(*values).arguments == by_name


def test_positional_of_refuses_what_is_not_a_plain_function() -> None:
    async def tool(a: int, b: int) -> int:
        return a + b

    plain = (("a", int), ("b", int))
    assert positional_of(tool, plain)
    assert not positional_of(functools.partial(tool), plain)
    assert not positional_of(tool, None)
    assert not positional_of(tool, (("b", int), ("a", int)))

    class Holder:
        async def tool(self, a: int, b: int) -> int:
            return a + b

    assert not positional_of(Holder().tool, plain)
