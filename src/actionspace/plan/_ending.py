"""The end of a plan run: its observations in order, with what was read of each when it settled.

:class:`~actionspace.plan.scheduler.Scheduler` reads every node's observation and note here once
the plan ended. When every node settled (the usual end) they are read with ``map`` and ``zip``,
in C, not by a loop of ours over a thousand nodes.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping

from actionspace.policy.stamped import Taken, taken
from actionspace.types import Observation

__all__ = ["read_results"]

_STATUS = operator.itemgetter(4)
"""A settled node's status, of what was read of it (:data:`~actionspace.policy.stamped.Taken`)."""
_ERROR = operator.itemgetter(5)
"""Its error, or None."""


def read_results(
    keys: list[str],
    results: Mapping[str, Observation],
    notes: Mapping[str, Taken],
    shown: list[Taken],
    failed: dict[str, str],
) -> tuple[dict[str, Observation], set[str]]:
    """The observations of ``keys`` that settled, in that order, and their statuses; each one's
    note (read when it settled, else now) appended to ``shown``, and the category of each with an
    error put in ``failed``."""
    nodes: dict[str, Observation] = {}
    try:  # every key settled (and noted as it settled)
        if len(keys) != len(results):
            raise KeyError
        notes_of = list(map(notes.__getitem__, keys))
        nodes = dict(zip(keys, map(results.__getitem__, keys), strict=True))
    except KeyError:
        for k in keys:
            obs = results.get(k)
            if obs is None:
                continue
            nodes[k] = obs
            note = notes.get(k)  # written with every result _settle wrote
            shown.append(taken(obs) if note is None else note)
    else:
        shown += notes_of
    errors = list(map(_ERROR, shown))
    if errors.count(None) < len(errors):
        for k, error in zip(nodes, errors, strict=True):
            if error is not None:
                failed[k] = error.category
    return nodes, set(map(_STATUS, shown))
