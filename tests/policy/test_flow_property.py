"""Property: no path from a secret-labelled source reaches an external sink without declassification.

The fast test generates dataflow graphs (sources with random labels, a random DAG of tool calls
whose arguments are plan references, literals written under the context rule, or values bound to
the user's input) and runs the engine's own functions — ``FlowState``, ``bindings``,
``evaluate`` — on each call, exactly as the runtime does. An independent oracle walks the graph
(sets of ancestors, no label joins) to find every sink that secret data can reach. Each
hypothesis example checks a batch of seeded graphs, so the CI slice covers 100,000 graphs.

The second test drives a real Runtime end to end (plans and single calls, honest and forged
``sources=`` claims) and looks at what the sink actually received.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Labels, Observation, Provenance, Runtime, ToolSpec
from actionspace.policy import DEFAULT_FLOW_POLICY, Allow, Ask, Deny, FlowState, Label, label_of
from actionspace.policy.flow import bindings, evaluate
from actionspace.runtime import DEFAULT_PRINCIPAL

LEVELS = ("public", "internal", "secret")
RANK = {c: i for i, c in enumerate(LEVELS)}
PROPS = ("recipient", "body", "amount", "note")
SCHEMA = {"type": "object", "properties": {p: {} for p in PROPS}}
GRAPHS_PER_EXAMPLE = 1000
EXAMPLES = 100  # 100 x 1000 = 100,000 graphs

SPECS = [
    ToolSpec(
        name=f"t{i}",
        effect=effect,  # type: ignore[arg-type]
        input_schema=SCHEMA,
        labels=Labels(confidentiality=conf, integrity=integrity, sink_max=sink_max),  # type: ignore[arg-type]
    )
    for i, (effect, conf, integrity, sink_max) in enumerate(
        (e, c, g, m)
        for e in ("none", "read", "write", "external")
        for c in LEVELS
        for g in ("trusted", "untrusted")
        for m in (None, "public", "internal", "secret")
    )
]
PRINCIPAL = DEFAULT_PRINCIPAL


@dataclass(slots=True)
class Item:
    """A source or a node, as the oracle sees it: the highest confidentiality rank and whether
    anything untrusted is among its ancestors (itself included), found by walking its inputs."""

    top: int
    untrusted: bool


@dataclass
class Tally:
    graphs: int = 0
    sinks: int = 0
    secret_flows: int = 0
    secret_allowed: int = 0
    precision_errors: int = 0
    untrusted_asks: int = 0


LABELS = [
    Label(confidentiality=c, integrity=g)  # type: ignore[arg-type]
    for c in LEVELS
    for g in ("trusted", "trusted", "untrusted")
]


def _oracle(items: dict[str, Item], names: set[str]) -> Item:
    """What flows in from ``names``: the max rank and any-untrusted over their ancestries."""
    top, untrusted = 0, False
    for name in names:
        item = items[name]
        top = max(top, item.top)
        untrusted = untrusted or item.untrusted
    return Item(top, untrusted)


def check_graph(rng: random.Random, tally: Tally) -> None:
    r = rng.random
    state = FlowState()
    items: dict[str, Item] = {}
    shown: set[str] = set()
    user_label = Label(confidentiality="secret") if r() < 0.1 else Label()
    state.add_user_input("please send to bob@x.com 100", user_label)
    items["user"] = Item(user_label.rank, False)
    shown.add("user")
    earlier: list[str] = []
    outputs: dict[str, tuple[str, Label]] = {}
    for i in range(1 + int(r() * 3)):
        name, label = f"s{i}", LABELS[int(r() * len(LABELS))]
        items[name] = Item(label.rank, label.untrusted)
        earlier.append(name)
        outputs[name] = (name, label)
        if r() < 0.5:  # shown to the model before it planned
            state.observed(Observation(call_id=name, tool="src", data=f"v{i}", provenance=_prov(label)))
            shown.add(name)
    sequential = r() < 0.5  # single calls (each result shown) or one plan
    for k in range(1 + int(r() * 6)):
        spec = SPECS[int(r() * len(SPECS))]
        node = f"n{k}"
        raw: dict[str, Any] = {}
        sources: dict[str, list[str]] = {}
        inputs: dict[str, set[str]] = {}
        for arg in PROPS:
            if r() < 0.55:
                continue
            mode = int(r() * 5)
            ref = earlier[int(r() * len(earlier))]
            if mode == 0:
                raw[arg] = {"$ref": f"{ref}.data"}
                inputs[arg] = {ref}
            elif mode == 1:
                other = earlier[int(r() * len(earlier))]
                raw[arg] = [{"$ref": f"{ref}.data"}, {"$ref": f"{other}.data"}]
                inputs[arg] = {ref, other}
            elif mode == 2:
                raw[arg] = {"text": {"$ref": f"{ref}.data"}, "extra": "literal"}
                inputs[arg] = {ref} | shown
            elif mode == 3:
                honest = r() < 0.5
                raw[arg] = "bob@x.com" if honest else "eve@evil.com"
                sources[arg] = ["user"]
                inputs[arg] = {"user"} if honest else set(shown)
            else:
                raw[arg] = "literal"
                inputs[arg] = set(shown)
        bound = bindings(raw, lambda text: outputs.get(text.partition(".")[0]))
        arguments = {a: (v if isinstance(v, str) else "resolved") for a, v in raw.items()}
        check = evaluate(
            DEFAULT_FLOW_POLICY, state, spec, arguments, principal=PRINCIPAL, run_id="r",
            sources=sources, bound=bound,
        )  # fmt: skip
        flowing = _oracle(items, set().union(*inputs.values()) if inputs else set())
        base = spec.labels
        items[node] = Item(
            max(flowing.top, RANK[base.confidentiality]), flowing.untrusted or base.integrity == "untrusted"
        )
        outputs[node] = (node, check.output)
        earlier.append(node)
        _judge(spec, check.decision, flowing, {a: _oracle(items, v) for a, v in inputs.items()}, tally)
        if sequential:
            state.observed(
                Observation(call_id=node, tool=spec.name, data="out", provenance=_prov(check.output))
            )
            shown.add(node)
    tally.graphs += 1


def _prov(label: Label) -> Provenance:
    return Provenance(labels=label.tags(), trust=label.integrity)


def _judge(spec: ToolSpec, decision: Any, flowing: Item, per_arg: dict[str, Item], tally: Tally) -> None:
    untrusted_risky = any(per_arg[a].untrusted for a in (spec.labels.high_risk_args or ()) if a in per_arg)
    writes = spec.effect in ("write", "external") or bool(spec.labels.sink)
    conf_ok = True
    if spec.labels.sink:
        tally.sinks += 1
        ceiling = RANK[spec.labels.sink_max or "internal"]
        conf_ok = flowing.top <= ceiling
        if flowing.top == RANK["secret"] and ceiling < flowing.top:
            tally.secret_flows += 1
            if not (isinstance(decision, Deny) and decision.declassify):
                tally.secret_allowed += 1
    if not conf_ok:
        ok = isinstance(decision, Deny) and decision.declassify
    elif writes and untrusted_risky:
        ok = isinstance(decision, Ask)
        tally.untrusted_asks += ok
    else:
        ok = isinstance(decision, Allow)
    tally.precision_errors += not ok


@pytest.mark.slow  # about 110 s: 100,000 graphs
@settings(
    max_examples=EXAMPLES, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(seed=st.integers(min_value=0, max_value=2**63 - 1))
def test_no_secret_reaches_an_external_sink_over_100000_generated_graphs(seed: int) -> None:
    rng = random.Random(seed)
    tally = Tally()
    for _ in range(GRAPHS_PER_EXAMPLE):
        check_graph(rng, tally)
    TOTAL.graphs += tally.graphs
    TOTAL.secret_flows += tally.secret_flows
    TOTAL.sinks += tally.sinks
    assert tally.secret_allowed == 0, tally
    assert tally.precision_errors == 0, tally
    assert tally.secret_flows > 0 and tally.untrusted_asks > 0  # the generator reaches both cases


TOTAL = Tally()


def test_the_property_run_covered_at_least_100000_graphs() -> None:
    if TOTAL.graphs == 0:  # run alone: do one full pass here
        for seed in range(EXAMPLES):
            rng, tally = random.Random(seed), Tally()
            for _ in range(GRAPHS_PER_EXAMPLE):
                check_graph(rng, tally)
            assert tally.secret_allowed == 0 and tally.precision_errors == 0
            TOTAL.graphs += tally.graphs
    assert TOTAL.graphs >= 100_000


# ---------------------------------------------------------------------- end to end
def _pick(values: list[tuple[str, str]], picks: list[int], k: int) -> tuple[str, str] | None:
    return values[picks[k % len(picks)] % len(values)] if values else None


SECRET_MARK = "SECRET"

node_kind = st.sampled_from(["secret", "public", "mail", "join", "send"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kinds=st.lists(node_kind, min_size=2, max_size=6),
    picks=st.lists(st.integers(min_value=0, max_value=10), min_size=12, max_size=12),
    claims=st.lists(st.sampled_from(["none", "user", "previous", "secret"]), min_size=6, max_size=6),
    as_plan=st.booleans(),
)
def test_a_real_runtime_never_sends_a_secret(
    kinds: list[str], picks: list[int], claims: list[str], as_plan: bool
) -> None:
    sent: list[str] = []
    rt = Runtime("memory://")

    @rt.tool(effect="read", labels=Labels(confidentiality="secret"))
    def read_secret() -> str:
        """A secret."""
        return f"{SECRET_MARK}-4711"

    @rt.tool(effect="read", labels=Labels(confidentiality="public"))
    def read_public() -> str:
        """Public news."""
        return "news"

    @rt.tool(effect="read", labels=Labels(confidentiality="public", integrity="untrusted"))
    def read_mail() -> str:
        """Third-party mail."""
        return "mail bob@x.com"

    @rt.tool(effect="none", labels=Labels(confidentiality="public"))
    def join(a: str, b: str) -> str:
        """Concatenate."""
        return f"{a} {b}"

    @rt.tool(effect="external")
    def send(recipient: str, body: str) -> str:
        """Send a message out."""
        sent.append(body)
        return "ok"

    tools = {
        "secret": "read_secret",
        "public": "read_public",
        "mail": "read_mail",
        "join": "join",
        "send": "send",
    }
    run = rt.new_run()
    rt.user_input(run, "send the news to bob@x.com")
    values: list[tuple[str, str]] = []  # (node id or call id, value) of earlier results
    nodes: list[dict[str, Any]] = []
    for i, kind in enumerate(kinds):
        args: dict[str, Any] = {}
        sources: dict[str, list[str]] = {}
        if kind in ("join", "send"):
            a, b = _pick(values, picks, 2 * i), _pick(values, picks, 2 * i + 1)
            body_src = a if a is not None else ("", "hello")
            if kind == "join":
                args = {"a": body_src[1], "b": (b or ("", "x"))[1]}
            else:
                args = {"recipient": "bob@x.com", "body": body_src[1]}
                sources["recipient"] = ["user"]
            claim = claims[i % 6]
            if claim != "none" and kind == "send":
                target = {
                    "user": "user",
                    "previous": body_src[0],
                    "secret": values[0][0] if values else "user",
                }[claim]
                sources["body"] = [target]
            if as_plan and a is not None:
                key = "a" if kind == "join" else "body"
                args[key] = {"$ref": f"{body_src[0]}.data"}
        nodes.append({"id": f"n{i}", "tool": tools[kind], "arguments": args, "sources": sources})
        values.append((f"n{i}", "?"))
        if not as_plan:
            obs = rt.call({"name": tools[kind], "arguments": args}, run_id=run, sources=sources)
            values[-1] = (obs.call_id, str(obs.data) if obs.ok else "blocked")
    if as_plan:
        plan = {"nodes": [{k: v for k, v in n.items() if k != "sources"} for n in nodes]}
        result = rt.run_plan(plan, run_id=run)
        for n in nodes:
            obs = result.nodes[n["id"]]
            if n["tool"] == "send" and obs.ok:
                assert not label_of(obs).secret
    rt.close()
    assert not any(SECRET_MARK in body for body in sent), sent
