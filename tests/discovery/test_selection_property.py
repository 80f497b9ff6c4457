"""The vectorised selection equals a plain reference: filter, rank, drop what is not permitted, cut."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.catalog.spec import ToolSpec
from actionspace.discovery import REASONS, Availability, CandidateIndex, Request, request_of
from actionspace.policy.principal import Principal, authorize
from actionspace.validation.verdicts import Accepted

WORDS = ("send", "mail", "read", "file", "event", "pay", "merge")
EFFECTS = ("none", "read", "write", "external")
PHASES = ("plan", "act")
CAPS = ("mail", "disk")


@st.composite
def catalogs(draw: st.DrawFn) -> tuple[list[ToolSpec], dict[str, Availability]]:
    n = draw(st.integers(0, 14))
    specs: list[ToolSpec] = []
    availability: dict[str, Availability] = {}
    for i in range(n):
        words = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3))
        specs.append(
            ToolSpec(
                name=f"{'_'.join(words)}_{i}",
                description=" ".join(words),
                effect=draw(st.sampled_from(EFFECTS)),
            )
        )
        availability[specs[-1].name] = Availability(
            phases=tuple(draw(st.lists(st.sampled_from(PHASES), max_size=1))),
            requires=tuple(draw(st.lists(st.sampled_from(CAPS), max_size=1))),
            recovers=tuple(draw(st.lists(st.sampled_from(("conflict", "transient")), max_size=1))),
        )
    return specs, availability


def _reference(
    specs: list[ToolSpec], availability: dict[str, Availability], index: CandidateIndex, req: Request
) -> tuple[list[str], dict[str, str]]:
    """The offered names and the reason per left-out key, computed one tool at a time."""
    reasons: dict[str, str] = {}
    eligible: list[int] = []
    for i, spec in enumerate(specs):
        a = availability[spec.name]
        if req.names is not None and spec.name not in req.names:
            reasons[spec.key] = "not_requested"
        elif req.phase is not None and a.phases and req.phase not in a.phases:
            reasons[spec.key] = "phase"
        elif req.capabilities is not None and any(c not in req.capabilities for c in a.requires):
            reasons[spec.key] = "capability"
        elif a.recovers and not set(a.recovers) & req.errors:
            reasons[spec.key] = "error_state"
        else:
            eligible.append(i)
    scores = index.ranker.scores(req.query).tolist() if req.query else [0.0] * len(specs)
    ranked = sorted(eligible, key=lambda i: (-scores[i], i))
    permitted = []
    for i in ranked:  # permission after ranking
        if isinstance(authorize(specs[i], req.principal), Accepted):
            permitted.append(i)
        else:
            reasons[specs[i].key] = "permission"
    if req.limit is not None:
        unlocked = [i for i in permitted if set(availability[specs[i].name].recovers) & req.errors]
        rest = [i for i in permitted if i not in unlocked]
        room = max(0, req.limit - len(unlocked))
        for i in rest[room:]:
            reasons[specs[i].key] = "rank_cut"
        permitted = unlocked + rest[:room]
    return [specs[i].name for i in permitted], reasons


@settings(max_examples=60, deadline=None)
@given(
    catalog=catalogs(),
    scopes=st.lists(
        st.sampled_from(["*", "read:*", "none:*", "write:send*", "external:pay_*", "x"]), max_size=3
    ),
    query=st.one_of(st.none(), st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join)),
    limit=st.one_of(st.none(), st.integers(0, 6)),
    phase=st.one_of(st.none(), st.sampled_from(PHASES)),
    capabilities=st.one_of(st.none(), st.sets(st.sampled_from(CAPS))),
    errors=st.sets(st.sampled_from(("conflict", "transient", "permanent"))),
    only=st.one_of(st.none(), st.sets(st.integers(0, 14))),
)
def test_the_selection_matches_the_one_tool_at_a_time_reference(
    catalog: tuple[list[ToolSpec], dict[str, Availability]],
    scopes: list[str],
    query: str | None,
    limit: int | None,
    phase: str | None,
    capabilities: set[str] | None,
    errors: set[str],
    only: set[int] | None,
) -> None:
    specs, availability = catalog
    names = None if only is None else {s.name for i, s in enumerate(specs) if i in only}
    req = request_of(
        Principal(id="p", scopes=tuple(scopes)),
        query=query,
        limit=limit,
        phase=phase,
        capabilities=capabilities,
        errors=errors,
        names=names,
    )
    index = CandidateIndex(specs, availability=availability)
    selection = index.select(req)
    offered, reasons = _reference(specs, availability, index, req)
    assert [s.name for s in selection.offered] == offered
    assert dict(selection.left_out) == reasons
    assert set(dict(selection.left_out).values()) <= set(REASONS)
