"""Principals and scopes, budgets and meters, information-flow labels and flow policies."""

from actionspace.policy.budget import Budget, Budgets, Meter, Usage, estimate
from actionspace.policy.flow import (
    ALLOW,
    DEFAULT_FLOW_POLICY,
    AllOf,
    Allow,
    AllowAll,
    AnyOf,
    Ask,
    Decision,
    Deny,
    FlowPolicy,
    FlowRequest,
    FlowState,
    NoSecretToExternalSink,
    ReadClearance,
    ReadersCoverRecipients,
    UntrustedHighRiskArgs,
    UntrustedWrites,
    label_of,
)
from actionspace.policy.labels import PUBLIC_TRUSTED, Label, may_read
from actionspace.policy.principal import Principal, authorize
from actionspace.policy.redaction import redact_event, redact_events

__all__ = [
    "ALLOW",
    "DEFAULT_FLOW_POLICY",
    "PUBLIC_TRUSTED",
    "AllOf",
    "Allow",
    "AllowAll",
    "AnyOf",
    "Ask",
    "Budget",
    "Budgets",
    "Decision",
    "Deny",
    "FlowPolicy",
    "FlowRequest",
    "FlowState",
    "Label",
    "Meter",
    "NoSecretToExternalSink",
    "Principal",
    "ReadClearance",
    "ReadersCoverRecipients",
    "UntrustedHighRiskArgs",
    "UntrustedWrites",
    "Usage",
    "authorize",
    "estimate",
    "label_of",
    "may_read",
    "redact_event",
    "redact_events",
]
