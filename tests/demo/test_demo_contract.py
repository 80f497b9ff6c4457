"""The calendar demo's booking: previewed by a dry run, proved delivered by reading the event back."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

from actionspace.demo.calendar import CalendarService
from actionspace.demo.scenario import PRINCIPAL, build_runtime, next_tuesday, seed_calendar


def _booking(day: date) -> dict[str, Any]:
    return {
        "name": "create_event",
        "arguments": {
            "title": "Design review",
            "start": f"{day.isoformat()}T15:30:00+08:00",
            "end": f"{day.isoformat()}T16:30:00+08:00",
            "timezone": "Asia/Shanghai",
            "attendees": ["u-chen", "u-wang", "u-zhao"],
        },
    }


def test_the_dry_run_books_nothing_and_the_booking_is_delivered(tmp_path: Path) -> None:
    day = next_tuesday(date(2026, 11, 30))
    service = CalendarService(tmp_path / "calendar.db")
    seed_calendar(service, day)
    rt = build_runtime(service, "memory://")
    try:
        before = service.count_events()
        run = rt.new_run(principal=PRINCIPAL)
        preview = rt.call(_booking(day), run_id=run, dry_run=True)
        assert preview.status == "ok", preview.error
        assert preview.diagnostics["dry_run"] is True
        assert service.count_events() == before
        booked = rt.call(_booking(day), run_id=run)
        assert booked.status == "ok", booked.error
        assert booked.diagnostics["completion"] == {"reached": "delivered", "required": "delivered"}
        assert service.count_events() == before + 1
    finally:
        rt.close()
        service.close()


def test_a_calendar_that_stores_something_else_is_not_delivered(tmp_path: Path) -> None:
    day = next_tuesday(date(2026, 11, 30))
    service = CalendarService(tmp_path / "calendar.db")
    seed_calendar(service, day)
    real_event = service.event

    def garbled(event_id: str) -> dict[str, Any] | None:  # a replica that lost the title
        event = real_event(event_id)
        return None if event is None else {**event, "title": "Untitled"}

    rt = build_runtime(service, "memory://")
    service.event = garbled  # type: ignore[method-assign]
    try:
        booked = rt.call(_booking(day), run_id=rt.new_run(principal=PRINCIPAL))
        assert booked.status == "error" and booked.error is not None
        assert booked.error.details["verifier"] == "read_back"
        assert booked.error.details["field"] == "title"
        assert booked.diagnostics["completion"]["reached"] == "accepted"
        assert booked.effects  # the write happened; only its delivery is unproved
    finally:
        rt.close()
        service.close()
