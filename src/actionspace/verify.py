"""Verifiers: post-conditions of a tool and checks of a conclusion against its observations.

As a tool's post-conditions (``@rt.tool(verify=[...], completion="delivered")``) they run after the
tool answered ok; a rejection turns the observation into an error naming the verifier, and
``diagnostics["completion"]`` reports the level the evidence reached (``sent`` < ``accepted`` <
``delivered``). As a plan node's ``verify`` they check the node's observation.

* :func:`read_back` — the resource, read again, holds what the call asked for (proves ``delivered``).
* :func:`fresh` — the observation is not older than a bound.
* :func:`no_other_items` — "these are all the items": a complete, unbroken walk with no item
  read twice and none missing.
* :func:`fields_equal`, :func:`predicate`, :func:`final` — any other check.

Verifiers compose: ``a & b``, ``a | b``.
"""

from __future__ import annotations

from actionspace.observation.postconditions import COMPLETION_LEVELS, check_postconditions, read_back
from actionspace.observation.verify import (
    AllOf,
    AnyOf,
    Completion,
    Observed,
    PostInput,
    Verifier,
    fields_equal,
    final,
    fresh,
    lookup,
    no_other_items,
    predicate,
    reject,
)

__all__ = [
    "COMPLETION_LEVELS",
    "AllOf",
    "AnyOf",
    "Completion",
    "Observed",
    "PostInput",
    "Verifier",
    "check_postconditions",
    "fields_equal",
    "final",
    "fresh",
    "lookup",
    "no_other_items",
    "predicate",
    "read_back",
    "reject",
]
