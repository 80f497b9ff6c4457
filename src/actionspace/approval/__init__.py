"""Approval requests with previews, decisions bound to the argument digest."""
