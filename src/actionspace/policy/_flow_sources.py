"""What an argument bound by ``sources=`` carries: the labels of the claimed sources it occurs in.

A source a third party wrote (untrusted integrity) vouches for where a value came from, never for
what choosing it reveals: its author picked the tokens the model chooses among, so a list of them,
or one per call, can spell anything the model has read. A value bound to such a source carries
the run's confidentiality and readers as well; a trusted source carries its own label only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from actionspace.policy.flow_policies import Origins
from actionspace.policy.labels import Label
from actionspace.policy.occurrence import occurs

if TYPE_CHECKING:
    from actionspace.policy.flow import FlowState

__all__ = ["verified"]


def verified(state: FlowState, value: Any, claimed: Sequence[str]) -> tuple[Label, Origins] | None:
    """(label, origins) of ``value`` bound to the ``claimed`` sources it occurs in; None when it
    occurs in none of them (the argument then carries the context label)."""
    label: Label | None = None
    found: list[tuple[str, Label]] = []
    for source_id in claimed:
        hit = state.source(str(source_id))
        if hit is None or not occurs(value, hit[1]):
            continue
        label = hit[0] if label is None else label.join(hit[0])
        found.append((str(source_id), hit[0]))
    if label is None:
        return None
    if label.integrity == "untrusted":
        context = state.context
        chosen = Label(confidentiality=context.confidentiality, readers=context.readers)
        if not chosen.flows_to(label):
            return label.join(chosen), (*found, *state.origins())
    return label, tuple(found)
