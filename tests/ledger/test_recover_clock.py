"""Recovery's age cutoff and the ledger's retention read the runtime's clock, not the wall."""

from __future__ import annotations

from actionspace import Runtime
from actionspace.ledger.commit import new_entry
from actionspace.types import ManualClock


def _runtime(clock: ManualClock) -> Runtime:
    rt = Runtime("memory://", clock=clock, recover_on_start=False)

    @rt.tool(effect="external")
    def notify(to: str) -> str:
        """Send a notice; it can neither dedupe nor be asked."""
        return to

    return rt


def test_an_entry_younger_than_the_cutoff_by_the_runtimes_clock_is_left_alone() -> None:
    clock = ManualClock()
    rt = _runtime(clock)
    spec = rt.catalog.get("notify")
    entry = new_entry(key="as1_" + "0" * 32, run_id="r1", node_id="n1", spec=spec, arguments={"to": "bob"})
    rt.ledger.begin(entry)
    rt.ledger.transition(entry.key, ("accepted",), entry.evolve(state="dispatched", attempts=1))
    assert rt.recover(min_age_s=30).to_dict()["unknown_commit"] == []
    clock.advance(31)
    assert rt.recover(min_age_s=30).to_dict()["unknown_commit"] == [entry.key]


def test_retention_counts_from_the_runtimes_clock() -> None:
    clock = ManualClock()
    rt = _runtime(clock)
    assert rt.call({"name": "notify", "arguments": {"to": "bob"}}).ok
    assert rt.purge(retention_s=3600) == 0
    clock.advance(3601)
    assert rt.purge(retention_s=3600) == 1
