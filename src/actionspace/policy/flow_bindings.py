"""Plan arguments bound by ``$ref``: the label each carries is its referenced nodes' labels joined
(with the run's context label too when the argument also holds literal values the model wrote)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from actionspace.policy.flow_policies import Origins
from actionspace.policy.labels import PUBLIC_TRUSTED, Label
from actionspace.types import find_refs

__all__ = ["Binding", "bindings"]


@dataclass(frozen=True, slots=True)
class Binding:
    """An argument bound by plan references: their joined label and where it came from."""

    label: Label
    origins: Origins
    mixed: bool = False
    """The argument also holds literal values written by the model: the context label joins in."""


def bindings(
    raw_arguments: Mapping[str, Any], ref_source: Callable[[str], tuple[str, Label] | None]
) -> dict[str, Binding]:
    """Plan arguments bound by ``$ref``: ``ref_source(ref_text)`` gives (call id, label) of its node."""
    out: dict[str, Binding] = {}
    for name, value in raw_arguments.items():
        whole = type(value) is dict and len(value) == 1 and "$ref" in value
        if whole:
            refs = [value["$ref"]]  # the common case: the whole argument is one reference
        elif isinstance(value, Mapping | list):
            refs = [raw for _pointer, raw in find_refs(value)]
        else:
            continue
        if not refs:
            continue
        label, origins = PUBLIC_TRUSTED, []
        for raw in refs:
            hit = ref_source(str(raw))
            if hit is None:
                break
            label = label.join(hit[1])
            if hit not in origins:
                origins.append(hit)
        else:
            out[name] = Binding(label, tuple(origins), not whole and _has_literal(value))
    return out


def _has_literal(value: Any) -> bool:
    if isinstance(value, Mapping):
        if "$ref" in value and len(value) == 1:
            return False
        return bool(value)  # its keys were written by the model: literal data, whatever the values are
    if isinstance(value, list):
        return any(_has_literal(v) for v in value)
    return True
