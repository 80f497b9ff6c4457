"""The idempotency ledger: keys, the intent state machine, and its stores."""
