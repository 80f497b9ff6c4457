"""Two processes take one approval for one action at the same moment: neither files a new request.

The service process that was waiting on the run and another one that resumes it both read the
approved request; one consumes it, the other's compare-and-set finds it moved. The loser used to
go on as if no decision existed and file a fresh request, which no one would ever decide (its run
waited forever on a call already paid for). For the same action (same node) the consumed approval
still stands: the ledger lets one of the two send it and replays it to the other.
"""

from __future__ import annotations

from collections.abc import Sequence

from actionspace.approval.gate import find_decision
from actionspace.approval.requests import ApprovalRequest
from actionspace.errors import ActionError
from actionspace.ledger.memory import MemoryApprovalStore


class _TakenMeanwhile(MemoryApprovalStore):
    """An approval store where another caller consumes the request between its read and our write."""

    def __init__(self, node_id: str) -> None:
        super().__init__()
        self.rival_node = node_id

    def update(
        self, request_id: str, expected: Sequence[str], request: ApprovalRequest
    ) -> ApprovalRequest | None:
        current = self.get(request_id)
        if current is not None and current.status == "approved":
            rival = current.evolve(status="consumed", node_id=self.rival_node)
            assert super().update(request_id, ("approved",), rival) is not None
        return super().update(request_id, expected, request)


def _approved(store: MemoryApprovalStore) -> ApprovalRequest:
    request = ApprovalRequest(
        id="apr_1",
        run_id="run",
        node_id="c1",
        tool="pay@1",
        args_digest="d",
        arguments={"to": "a"},
        provenance={},
    )
    store.create(request)
    decided = store.update("apr_1", ("pending",), request.evolve(status="approved", decided_by="alice"))
    assert decided is not None
    return decided


def _decide(store: MemoryApprovalStore, *, replays: bool) -> ApprovalRequest | ActionError | None:
    return find_decision(store, run_id="run", node_id="c1", tool="pay@1", digest="d", replays=replays)


def test_a_write_whose_approval_another_caller_consumed_for_the_same_node_runs_under_it() -> None:
    store = _TakenMeanwhile("c1")
    _approved(store)
    found = _decide(store, replays=True)
    assert isinstance(found, ApprovalRequest) and (found.id, found.status) == ("apr_1", "consumed")


def test_a_read_or_another_node_gets_no_second_use_of_a_consumed_approval() -> None:
    for store, replays in ((_TakenMeanwhile("c1"), False), (_TakenMeanwhile("c9"), True)):
        _approved(store)
        assert _decide(store, replays=replays) is None  # the caller files its own request
