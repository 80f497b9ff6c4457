"""Labels read back from observations, and what the flow state reads of an observation it is shown.

An observation carries its output label as provenance tags (``labels`` and ``trust``);
:func:`stamped` turns them back into a :class:`~actionspace.policy.labels.Label`, cached, as a
run's observations carry a handful of distinct ones. :func:`taken` is everything
:meth:`FlowState.observed_many <actionspace.policy.flow.FlowState.observed_many>` and a plan's end
read of an observation, read while the observation is at hand: a plan takes it when a node settles, so that
showing a thousand observations once the plan ended does not read a thousand objects made long
before, which have left the processor's caches by then
(:meth:`FlowState.observed_taken <actionspace.policy.flow.FlowState.observed_taken>`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from actionspace.errors import ActionError
from actionspace.policy.labels import Label
from actionspace.types import Observation

__all__ = ["Taken", "label_of", "restamped", "stamped", "taken"]

Taken = tuple["str | None", Any, Any, Any, str, "ActionError | None", str]
"""An observation as read once (:func:`taken`): for a plain observation, one without items or an
artifact reference, its call id, its provenance's ``labels`` and ``trust`` (the label it was
stamped with: :func:`stamped`) and its data (four Nones otherwise: the flow state reads such an
observation whole); then its status, its error and its tool's name. It holds no object the
cyclic collector tracks for a plain result (the observation itself is not in it), so the
collector soon stops tracking it and a plan drops a thousand of them cheaply."""


def label_of(obs: Observation) -> Label:
    """The label an observation was stamped with (its provenance ``labels`` and ``trust``)."""
    provenance = obs.provenance
    return stamped(provenance.labels, provenance.trust)


def restamped(obs: Observation, label: Label | None) -> Observation:
    """``obs`` stamped with its own label joined with ``label`` (``obs`` itself when that adds
    nothing): a cached result asked for by a call whose inputs carry more than the call that
    filled the entry carries both."""
    if label is None:
        return obs
    own = label_of(obs)
    joined = own.join(label)
    if joined == own:
        return obs
    provenance = replace(obs.provenance, labels=joined.tags(), trust=joined.integrity)
    return replace(obs, provenance=provenance)


def stamped(tags: Any, trust: str) -> Label:
    """The label of provenance ``tags`` and ``trust`` (cached)."""
    key = (tags, trust)
    try:
        label = _STAMPED.get(key)
    except TypeError:  # labels given as a list: not a key, read them each time
        return Label.from_tags(tags, trust)
    if label is None:
        label = Label.from_tags(tags, trust)
        if len(_STAMPED) >= _STAMPED_MAX:
            _STAMPED.clear()
        _STAMPED[key] = label
    return label


_STAMPED: dict[tuple[Any, str], Label] = {}
"""Labels read back from provenance tags: a run's observations carry a handful of distinct ones."""
_STAMPED_MAX = 1024


def taken(obs: Observation) -> Taken:
    """``obs`` read once, while it is at hand (see :data:`Taken`)."""
    if obs.items or obs.artifact_ref is not None:
        return (None, None, None, None, obs.status, obs.error, obs.tool)
    provenance = obs.provenance
    return (obs.call_id, provenance.labels, provenance.trust, obs.data, obs.status, obs.error, obs.tool)
