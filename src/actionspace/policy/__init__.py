"""Principals and scopes, and (later) labels, budgets and approval rules."""

from actionspace.policy.principal import Principal, authorize

__all__ = ["Principal", "authorize"]
