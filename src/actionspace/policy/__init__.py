"""Principals and scopes, budgets and meters, and (later) labels and approval rules."""

from actionspace.policy.budget import Budget, Budgets, Meter, Usage, estimate
from actionspace.policy.principal import Principal, authorize

__all__ = ["Budget", "Budgets", "Meter", "Principal", "Usage", "authorize", "estimate"]
