"""A call that passed every stage before execution, and what execution records about it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from actionspace.errors import ActionError
from actionspace.execution.guarded import Admission
from actionspace.policy.labels import Label
from actionspace.validation.validator import CompiledTool

__all__ = ["CallEvents", "Ready"]


@dataclass(slots=True)
class Ready:
    """A call that passed every check before execution."""

    compiled: CompiledTool
    call_id: str
    node_id: str
    arguments: Mapping[str, Any]
    kwargs: Mapping[str, Any]
    """What the function receives (converted arguments plus runtime-filled parameters)."""
    key: str | None
    admission: Admission | None = None
    """Budget reservation and cache lookup, when budgets or the read cache apply to the call."""
    label: Label | None = None
    """The output label (the tool's label joined with the argument labels), stamped by observe."""
    exempt: Callable[[], Admission | ActionError | None] | None = None
    """Set when the budget let the call through uncharged as the replay of its ledger entry: admits
    it through the budget (once), should the ledger find the entry sendable after all."""


class CallEvents(Protocol):
    """Where execution appends a call's trace events (the engine's recorder)."""

    @property
    def run_id(self) -> str: ...

    def add(self, kind: str, data: Mapping[str, Any]) -> None: ...

    def retry(self, attempt: int, error: ActionError, delay: float) -> None: ...
