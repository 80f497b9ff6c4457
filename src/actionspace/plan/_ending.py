"""The end of a plan run: its observations in order, with what was read of each when it settled.

:class:`~actionspace.plan.scheduler.Scheduler` reads every node's observation and note here once
the plan ended. When every node settled (the usual end) they are read without a loop of ours
over a thousand nodes: the plan's keys, made once per checked plan as a dict
(:class:`~actionspace.plan._checked.Start`), copied and filled by one ``update``, and the notes,
which began as such a copy, in their order as they are.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import cast

from actionspace.plan._checked import Start
from actionspace.policy.stamped import Taken, taken
from actionspace.types import Observation

__all__ = ["read_results"]

_STATUS = operator.itemgetter(4)
"""A settled node's status, of what was read of it (:data:`~actionspace.policy.stamped.Taken`)."""
_ERROR = operator.itemgetter(5)
"""Its error, or None."""


def read_results(
    start: Start,
    results: Mapping[str, Observation],
    notes: Mapping[str, Taken | None],
    shown: list[Taken],
    failed: dict[str, str],
) -> tuple[dict[str, Observation], set[str]]:
    """The observations of ``start.keys`` that settled, in that order, and their statuses; each
    one's note (read when it settled, else now) appended to ``shown``, and the category of each
    with an error put in ``failed``. ``notes`` began as a copy of ``start.listed`` (None: not
    settled), so when every key settled its values are in the result's order already."""
    keys, listed = start.keys, start.listed
    nodes: dict[str, Observation] = {}
    try:  # every key settled (and noted as it settled), and nothing else did
        if len(keys) != len(results) or len(listed) != len(keys) or len(notes) != len(keys):
            raise KeyError
        nodes = cast("dict[str, Observation]", listed.copy())
        nodes.update(results)  # (filled in listing order)
        if len(nodes) != len(keys):  # a result of a key not listed
            raise KeyError
        notes_of = cast("list[Taken]", list(notes.values()))
        statuses = set(map(_STATUS, notes_of))  # TypeError: a key settled without its note (None)
    except (KeyError, TypeError):
        nodes = {}
        for k in keys:
            obs = results.get(k)
            if obs is None:
                continue
            nodes[k] = obs
            note = notes.get(k)  # written with every result _settle wrote
            shown.append(taken(obs) if note is None else note)
        statuses = set(map(_STATUS, shown))
    else:
        shown += notes_of
    errors = list(map(_ERROR, shown))
    if errors.count(None) < len(errors):
        for k, error in zip(nodes, errors, strict=True):
            if error is not None:
                failed[k] = error.category
    return nodes, statuses
