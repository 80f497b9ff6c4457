from __future__ import annotations

from datetime import date
from typing import Any

from actionspace.catalog.registry import Catalog
from actionspace.catalog.spec import ToolSpec
from actionspace.ledger.memory import MemoryLedgerStore
from actionspace.ledger.recover import Shaped, recover
from actionspace.ledger.status import Committed
from actionspace.observation import shape as observation_shape
from actionspace.outcomes import ToolResult
from actionspace.types import Effect, Observation
from tests.ledger.factories import entry

SCHEMA: dict[str, Any] = {"type": "object", "properties": {"amount": {"type": "integer"}}}


def _crashed_pay(result: Any) -> tuple[MemoryLedgerStore, Catalog, str]:
    """A ledger whose ``pay`` entry a crash left ``dispatched``; the bank says it committed."""

    def pay(**_: Any) -> None:
        raise AssertionError("recovery never sends")

    def status(*, key: str, arguments: Any) -> Committed:
        return Committed(result, remote_id="tx_9")

    spec = ToolSpec(
        name="pay", input_schema=SCHEMA, fn=pay, effect="write", idempotency="query", status_query=status
    )
    catalog = Catalog()
    catalog.register(spec)
    ledger = MemoryLedgerStore()
    crashed = entry(state="dispatched")
    ledger.begin(crashed)
    return ledger, catalog, crashed.key


def _recovered(ledger: MemoryLedgerStore, catalog: Catalog, key: str, **options: Any) -> Observation:
    events: list[tuple[str, str]] = []
    report = recover(ledger, catalog, lambda run, kind, data: events.append((run, kind)), **options)
    assert report.committed == [key] and events == [("r1", "ledger")]
    settled = ledger.get(key)
    assert settled is not None and settled.observation is not None and settled.remote_id == "tx_9"
    return Observation.from_dict(settled.observation)


def test_a_committed_result_becomes_plain_json_data_by_default() -> None:
    result = ToolResult(data={"on": date(2026, 12, 1)}, effects=(Effect(resource_id="tx:9", kind="created"),))
    obs = _recovered(*_crashed_pay(result))
    assert obs.data == {"on": "2026-12-01"}
    assert [e.resource_id for e in obs.effects] == ["tx:9"]
    assert obs.content_hash is not None and obs.diagnostics["recovered"] is True


def test_recovery_shapes_a_committed_result_with_the_shape_it_is_handed() -> None:
    def shape(value: object) -> Shaped:
        return observation_shape({"wrapped": value})

    obs = _recovered(*_crashed_pay({"id": "tx_9"}), shape=shape)
    assert obs.data == {"wrapped": {"id": "tx_9"}}
    assert obs.content_hash == observation_shape({"wrapped": {"id": "tx_9"}}).content_hash
