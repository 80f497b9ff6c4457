"""Recovery's age cutoff and the ledger's retention read the runtime's clock, not the wall.

An entry is stamped with the wall clock when it is written, whenever that is after the manual
clock was made (a loaded machine may take seconds to build the runtime in between): each test
moves the manual clock relative to the stamp the entry got, so the age it reaches is exact.
"""

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


def _age_to(clock: ManualClock, stamp: float, age: float) -> None:
    """Move ``clock`` forward until an entry stamped ``stamp`` is ``age`` seconds old by it."""
    clock.advance(max(0.0, stamp + age - clock.time()))
    assert abs(clock.time() - stamp - age) < 1e-3  # the clock never starts after the stamp


def test_an_entry_younger_than_the_cutoff_by_the_runtimes_clock_is_left_alone() -> None:
    clock = ManualClock()
    with _runtime(clock) as rt:
        spec = rt.catalog.get("notify")
        entry = new_entry(
            key="as1_" + "0" * 32, run_id="r1", node_id="n1", spec=spec, arguments={"to": "bob"}
        )
        rt.ledger.begin(entry)
        rt.ledger.transition(entry.key, ("accepted",), entry.evolve(state="dispatched", attempts=1))
        stored = rt.ledger.get(entry.key)
        assert stored is not None
        _age_to(clock, stored.updated_at, 29)
        assert rt.recover(min_age_s=30).to_dict()["unknown_commit"] == []
        _age_to(clock, stored.updated_at, 31)  # by the wall it is still a moment old
        assert rt.recover(min_age_s=30).to_dict()["unknown_commit"] == [entry.key]


def test_retention_counts_from_the_runtimes_clock() -> None:
    clock = ManualClock()
    with _runtime(clock) as rt:
        assert rt.call({"name": "notify", "arguments": {"to": "bob"}}).ok
        (settled,) = rt.ledger.list(limit=10)
        _age_to(clock, settled.updated_at, 3599)
        assert rt.purge(retention_s=3600) == 0
        _age_to(clock, settled.updated_at, 3601)  # by the wall it is still a moment old
        assert rt.purge(retention_s=3600) == 1
