"""Arguments written for an earlier version of a tool: ``version_mismatch`` naming both versions.

A model that learned ``search@1(q=...)`` and calls ``search@2``, which renamed ``q`` to ``query``,
must not get a bare ``invalid_arguments``: the fields it sent are the old version's, and saying
so (both versions and the renamed fields) is what lets it rebuild the call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ActionError

__all__ = ["earlier_version_mismatch"]


def _properties(spec: ToolSpec) -> list[str]:
    props = spec.input_schema.get("properties")
    return list(props) if isinstance(props, Mapping) else []


def earlier_version_mismatch(
    spec: ToolSpec, versions: Sequence[ToolSpec], arguments: Any
) -> ActionError | None:
    """``version_mismatch`` when ``arguments`` use fields ``spec`` lacks but an earlier version has.

    ``versions``: every registered version of the tool, oldest first. The newest earlier version
    holding every unknown field is named; ``details["renamed"]`` pairs each old field with the new
    field that took its place (paired in schema order among the fields only one side has), and
    ``details["removed"]`` lists old fields with no counterpart. None when no earlier version fits.
    """
    if not isinstance(arguments, Mapping):
        return None
    current = _properties(spec)
    unknown = [k for k in arguments if k not in current]
    if not unknown:
        return None
    earlier = [v for v in versions if v.key != spec.key]
    for old in reversed(earlier):
        before = _properties(old)
        if not all(k in before for k in unknown):
            continue
        gone = [k for k in before if k not in current]
        added = [k for k in current if k not in before]
        renamed = {o: n for o, n in zip(gone, added, strict=False) if o in unknown}
        removed = [k for k in unknown if k not in renamed]
        changes = ", ".join(f"{o} → {n}" for o, n in renamed.items())
        message = (
            f"these arguments are {old.key}'s; this run calls {spec.key}"
            + (f", which renamed {changes}" if changes else "")
            + (f" and dropped {', '.join(removed)}" if removed else "")
            + "; rebuild the arguments from its definition"
        )
        details: dict[str, Any] = {
            "current": spec.key,
            "arguments_match": old.key,
            "renamed": renamed,
            "removed": removed,
            "schema": dict(spec.input_schema),
        }
        return ActionError.of("version_mismatch", message, details=details, current_version=spec.version)
    return None
