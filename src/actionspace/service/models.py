"""Request and response bodies of the JSON API (pydantic), so the OpenAPI spec is exact.

Times are ISO-8601 UTC strings (``2026-12-01T22:27:10.123456Z``); the views hand the stores' Unix
seconds to these models, which convert them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field

__all__ = [
    "ApprovalView",
    "CallsRun",
    "DecisionBody",
    "ErrorBody",
    "ErrorResponse",
    "EventView",
    "Health",
    "LedgerEntryView",
    "MetricsView",
    "PlanNodeView",
    "PlanRun",
    "PlanView",
    "ResolveBody",
    "RunAccepted",
    "RunDetail",
    "RunRow",
    "SubmitRun",
    "ToolView",
]


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorBody(_Out):
    category: str | None = Field(
        None,
        description="An actionspace error category: the route's own, else its status's (always present).",
    )
    message: str


class ErrorResponse(_Out):
    error: ErrorBody


class Health(_Out):
    status: Literal["ok"]
    version: str


class RunRow(_Out):
    run_id: str
    started_at: AwareDatetime = Field(description="When the run's first event was recorded (ISO-8601 UTC).")
    finished_at: AwareDatetime | None = Field(
        description="When ``run_finished`` was recorded; null while open."
    )
    last_at: AwareDatetime = Field(description="When the run's latest event was recorded (the list's order).")
    status: str = Field(
        description="What ``run_finished`` recorded; else ``running``, ``waiting_approval`` or ``open``."
    )
    principal: str | None
    calls: int
    errors: int
    events: int


class PlanNodeView(_Out):
    id: str
    tool: str
    status: str = Field(
        description="ok, error, partial, blocked, cancelled, waiting_approval, denied or pending."
    )
    category: str | None = Field(None, description="The error category of a node that did not end ok.")


class PlanView(_Out):
    nodes: list[PlanNodeView]
    edges: list[list[str]] = Field(description="Ordering edges ``[from, to]``.")


class RunDetail(RunRow):
    plan: PlanView | None


class EventView(_Out):
    seq: int
    kind: str
    call_id: str | None
    at: AwareDatetime = Field(description="When it was recorded (ISO-8601 UTC).")
    data: dict[str, Any]


def _no_dot_segment(run_id: str | None) -> str | None:
    """Refuse ``.`` and ``..``: URL clients (browsers, curl, httpx) remove such a path segment, so
    no ``/api/runs/{run_id}`` nor console link could reach the run."""
    if run_id in (".", ".."):
        raise ValueError("a run id may not be a dot segment ('.' or '..'): no URL could name the run")
    return run_id


_RUN_ID = Field(
    None,
    min_length=1,
    max_length=200,
    pattern=r"^[A-Za-z0-9_.:-]+$",
    description="The new run's id (default: a fresh ``run_…`` id); not ``.`` nor ``..``.",
)
_SubmittedRunId = Annotated[str | None, AfterValidator(_no_dot_segment)]
"""A submitted run id: :data:`_RUN_ID`'s pattern, and no dot segment."""


class PlanRun(BaseModel):
    """Run a plan (Plan JSON). A plan that cannot be read or checked ends the run with ``error``."""

    model_config = ConfigDict(extra="forbid")

    plan: dict[str, Any]
    run_id: _SubmittedRunId = _RUN_ID


class CallsRun(BaseModel):
    """Run raw model outputs (any accepted provider format), one after another."""

    model_config = ConfigDict(extra="forbid")

    calls: list[Any] = Field(max_length=1000)
    run_id: _SubmittedRunId = _RUN_ID


SubmitRun = PlanRun | CallsRun


class RunAccepted(_Out):
    run_id: str


class ApprovalView(_Out):
    request_id: str
    id: str
    run_id: str
    node_id: str
    tool: str
    args_digest: str
    arguments: dict[str, Any]
    provenance: dict[str, str]
    effects: list[str]
    reason: str
    details: dict[str, Any]
    status: str
    created_at: AwareDatetime
    decided_at: AwareDatetime | None
    decided_by: str | None
    decision_reason: str | None
    expires_at: AwareDatetime | None
    preview: dict[str, Any] = Field(
        description="What a person approves: tool, arguments, provenance per argument, effects, items."
    )


class DecisionBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str | None = Field(
        None,
        max_length=2000,
        pattern=r"^[^\x00]*$",
        description="Why, in words (no NUL character: PostgreSQL's text cannot hold one).",
    )


class LedgerEntryView(_Out):
    key: str
    run_id: str
    node_id: str
    tool: str
    args_digest: str
    arguments: dict[str, Any]
    state: str
    attempts: int
    created_at: AwareDatetime
    updated_at: AwareDatetime
    remote_id: str | None
    observation: dict[str, Any] | None
    error: dict[str, Any] | None
    resolution: dict[str, Any] | None


class ResolveBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    outcome: Literal["committed", "not_committed"]
    note: str | None = Field(
        None,
        max_length=2000,
        pattern=r"^[^\x00]*$",
        description="What the person checked, in words (no NUL character, as for a decision's reason).",
    )


class ToolView(_Out):
    name: str
    version: str
    description: str
    input_schema: dict[str, Any]
    effect: str
    risk: str
    schema_hash: str
    summary: str
    lifecycle: str
    idempotency: str
    reversible: bool | None
    requires_approval: bool
    reads: list[str]
    writes: list[str]
    owner: str | None
    completion: str | None = None
    """The completion level the tool's contract declares (``ToolSpec.completion``), when any."""
    dry_run: bool | None = None
    """True when the tool has a preview (``dry_run`` calls run it instead of the tool)."""
    contract_note: str | None = None
    """One line on the tool's contract for a person reviewing the catalog."""


class ToolHealthView(_Out):
    tool: str
    calls: int
    selection_rate: float
    rejects: int
    rejects_by_category: dict[str, int]
    rejects_by_field: dict[str, int]
    failures: int
    failures_by_category: dict[str, int]
    """Dispatched calls that ended in a decided error, by category."""
    undecided: int = 0
    undecided_by_category: dict[str, int] = Field(default_factory=dict)
    """Calls waiting for approval or told ``unknown_commit``, by category: neither failed nor ok."""
    unknown_commits: int
    ok_results: int
    replays: int = 0
    """Calls answered from the ledger's record of an identical committed action (not in ``ok_results``)."""
    used_results: int
    utilization: float | None
    consumers: int
    consumers_ok: int
    downstream_success: float | None


class AlertView(_Out):
    kind: str
    tool: str
    message: str
    count: int
    total: int
    field: str | None


class MetricsView(_Out):
    runs: int
    calls: int
    since: AwareDatetime | None
    tools: list[ToolHealthView]
    alerts: list[AlertView]
    tools_left_out: int = Field(
        default=0,
        description="Tools outside the catalog not shown (past the 20 most called of them), their"
        " alerts left out too.",
    )
    calls_left_out: int = Field(default=0, description="The calls of the tools left out.")
