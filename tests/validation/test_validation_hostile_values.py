"""Refinements and semantic types against values written to slip past them."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any

import pytest

from actionspace.catalog import ToolSpec, spec_from_function
from actionspace.validation.semantic import Money, PathWithin, UrlRule
from actionspace.validation.validator import Validated, after, compile_tool, validate
from actionspace.validation.verdicts import Accepted, Rejected


def _check(spec: ToolSpec, args: Any) -> Validated:
    return validate(compile_tool(spec), args, {}, None)


def _paths(result: Validated) -> list[str]:
    assert isinstance(result.verdict, Rejected), result.verdict
    assert result.verdict.error.category == "invalid_arguments"
    return [f.path for f in result.verdict.error.field_errors]


def book(start: str, end: str | int | None = None) -> None:
    """Book a slot."""


BOOK = spec_from_function(book, effect="write", refinements=(after("end", "start"),))


@pytest.mark.parametrize(
    ("start", "end"),
    [
        ("2026-12-02T00:00:00+00:00", "2026-12-01"),  # an aware start, a naive end: before it anyway
        ("2026-12-02T00:00:00+00:00", "2026-12-01T23:00:00"),
        ("2026-12-02T00:00:00+00:00", "yesterday"),
        ("2026-12-02", 5),
    ],
)
def test_an_end_that_cannot_be_compared_with_its_start_is_rejected(start: str, end: Any) -> None:
    assert _paths(_check(BOOK, {"start": start, "end": end})) == ["/end"]


def test_an_end_after_its_start_in_another_offset_is_accepted_and_an_absent_end_is_not_checked() -> None:
    ok = _check(BOOK, {"start": "2026-12-01T10:00:00+08:00", "end": "2026-12-01T03:00:00+00:00"})
    assert isinstance(ok.verdict, Accepted)
    assert isinstance(_check(BOOK, {"start": "2026-12-01T10:00:00+08:00", "end": None}).verdict, Accepted)
    late = _check(BOOK, {"start": "2026-12-01T10:00:00+08:00", "end": "2026-12-01T01:00:00+00:00"})
    assert _paths(late) == ["/end"]


def fetch(url: Annotated[str, UrlRule(hosts=("allowed.com",))]) -> None:
    """Fetch a page of one host."""


FETCH = spec_from_function(fetch, effect="read")


@pytest.mark.parametrize(
    "url",
    [
        "https://evil.com\\@allowed.com/",  # WHATWG clients read the backslash as "/": host evil.com
        "https://evil.com\\\\@allowed.com/",
        "https://evil.com @allowed.com/",
        "https://allowed.com@evil.com/",
        "https://allowed.com.evil.com/",
        "https://evil.com\x00@allowed.com/",
    ],
)
def test_a_url_whose_host_a_client_may_read_differently_is_rejected(url: str) -> None:
    assert _paths(_check(FETCH, {"url": url})) == ["/url"]


def test_a_url_of_an_allowed_host_is_accepted_whatever_the_case_of_its_host() -> None:
    assert isinstance(_check(FETCH, {"url": "https://user@ALLOWED.com:8443/a?b#c"}).verdict, Accepted)


def pay(amount: Money) -> None:
    """Pay an amount."""


PAY = spec_from_function(pay, effect="external")


@pytest.mark.parametrize("amount", ["\u0661\u0660\u0660", "1_000", " 12.50 ", "-0", "-0.00", -0.0])
def test_a_money_amount_not_written_as_a_plain_decimal_or_negative_zero_is_rejected(amount: Any) -> None:
    assert _paths(_check(PAY, {"amount": {"amount": amount, "currency": "USD"}})) == ["/amount"]


@pytest.mark.parametrize("amount", ["12.50", "-3.10", "1e3", 0, "0.00", 7])
def test_a_plain_money_amount_is_accepted(amount: Any) -> None:
    result = _check(PAY, {"amount": {"amount": amount, "currency": "USD"}})
    assert isinstance(result.verdict, Accepted), result.verdict
    assert result.python_arguments is not None
    assert result.python_arguments["amount"].amount == Decimal(str(amount))


def test_a_hand_written_money_marker_needs_an_iso_currency_code() -> None:
    schema = {
        "type": "object",
        "properties": {"amount": {"type": "object", "x-actionspace": {"type": "money"}}},
        "required": ["amount"],
    }
    spec = ToolSpec(name="pay_raw", input_schema=schema, effect="external")
    assert _paths(_check(spec, {"amount": {"amount": "1.5", "currency": "jpy"}})) == ["/amount"]
    assert _paths(_check(spec, {"amount": {"amount": "1.5"}})) == ["/amount"]
    assert isinstance(_check(spec, {"amount": {"amount": "1.5", "currency": "EUR"}}).verdict, Accepted)


def read(path: Annotated[str, PathWithin("/")]) -> None:
    """Read any file."""


def test_a_path_within_the_filesystem_root_is_accepted() -> None:
    spec = spec_from_function(read, effect="read")
    assert isinstance(_check(spec, {"path": "etc/hosts"}).verdict, Accepted)
    assert isinstance(_check(spec, {"path": "/etc/hosts"}).verdict, Accepted)
    assert _paths(_check(spec, {"path": "etc/\x00hosts"})) == ["/path"]
