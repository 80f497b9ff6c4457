from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any

import jsonschema_rs
import pytest

from actionspace.catalog import ToolSpec, spec_from_function
from actionspace.errors import ActionError, FieldError
from actionspace.validation.semantic import (
    URL,
    Currency,
    Money,
    PathWithin,
    ResourceKind,
    ResourceRef,
    Timestamp,
)
from actionspace.validation.validator import (
    Validated,
    ValidationContext,
    after,
    compile_tool,
    schema_errors,
    validate,
)
from actionspace.validation.verdicts import Accepted, NeedsApproval, Rejected

VERSIONS = {"e1": "v2"}


def _ctx(**state: Any) -> ValidationContext:
    return ValidationContext(
        run_id="r",
        node_id="n1",
        call_id="c1",
        principal_id="p",
        scopes=("*",),
        resource_version=lambda kind, rid: VERSIONS.get(rid),
        state=state,
    )


def _check(spec: ToolSpec, args: Any, provenance: Mapping[str, str] | None = None) -> Validated:
    return validate(compile_tool(spec), args, provenance or {}, _ctx())


def _error(result: Validated) -> ActionError:
    assert isinstance(result.verdict, Rejected), result.verdict
    return result.verdict.error


def _paths(result: Validated) -> list[str]:
    return [f.path for f in _error(result).field_errors]


def schedule(title: str, start: Timestamp, end: Timestamp, room: str = "main") -> None:
    """Schedule something."""


SCHEDULE = spec_from_function(schedule, effect="write", refinements=(after("end", "start"),))
START, END = "2026-12-01T15:00:00+08:00", "2026-12-01T16:00:00+08:00"


def test_valid_call_is_accepted_with_defaults_written_into_the_normalized_call() -> None:
    result = _check(SCHEDULE, {"title": "review", "start": START, "end": END}, {"title": "user"})
    assert isinstance(result.verdict, Accepted)
    assert result.arguments["room"] == "main"
    assert result.provenance == {"title": "user", "room": "default"}


def test_schema_errors_name_every_field_by_json_pointer() -> None:
    result = _check(SCHEDULE, {"title": 5, "start": START, "extra": 1})
    err = _error(result)
    assert err.category == "invalid_arguments"
    assert sorted(_paths(result)) == ["/end", "/extra", "/title"]


def test_timestamp_without_offset_is_rejected_with_the_field_named() -> None:
    result = _check(SCHEDULE, {"title": "x", "start": "2026-12-01T15:00:00", "end": END})
    assert _paths(result) == ["/start"]
    assert "UTC offset" in _error(result).field_errors[0].message


def test_end_before_start_is_a_relational_error_on_end() -> None:
    result = _check(SCHEDULE, {"title": "x", "start": END, "end": START})
    assert _paths(result) == ["/end"]
    assert "end must be after start" in _error(result).field_errors[0].message


def test_path_escaping_its_root_is_rejected(tmp_path: Any) -> None:
    def read(path: str) -> None: ...

    # Annotations naming a local are not resolvable from a string; set the evaluated one.
    read.__annotations__ = {"path": Annotated[str, PathWithin(str(tmp_path))], "return": None}
    spec = spec_from_function(read, effect="read")
    assert isinstance(_check(spec, {"path": "a/b.txt"}).verdict, Accepted)
    assert _paths(_check(spec, {"path": "../etc/passwd"})) == ["/path"]
    assert _paths(_check(spec, {"path": "/etc/passwd"})) == ["/path"]
    (tmp_path / "link").symlink_to("/etc")
    assert _paths(_check(spec, {"path": "link/passwd"})) == ["/path"]


def test_money_in_the_wrong_currency_or_with_too_many_decimals_is_rejected() -> None:
    def pay(amount: Annotated[Money, Currency("EUR")]) -> None: ...

    spec = spec_from_function(pay, effect="external")
    ok = _check(spec, {"amount": {"amount": "12.50", "currency": "EUR"}})
    assert isinstance(ok.verdict, Accepted)
    assert ok.python_arguments is not None and isinstance(ok.python_arguments["amount"], Money)
    wrong = _check(spec, {"amount": {"amount": "12.50", "currency": "USD"}})
    assert _paths(wrong) == ["/amount"] and "must be EUR" in _error(wrong).field_errors[0].message
    assert _paths(_check(spec, {"amount": {"amount": "1.005", "currency": "EUR"}})) == ["/amount"]


def test_url_scheme_and_host_rules_apply() -> None:
    def fetch(url: URL) -> None: ...

    spec = spec_from_function(fetch, effect="read")
    assert isinstance(_check(spec, {"url": "https://example.org/x"}).verdict, Accepted)
    assert _paths(_check(spec, {"url": "file:///etc/passwd"})) == ["/url"]
    assert _paths(_check(spec, {"url": "https://"})) == ["/url"]


def test_stale_resource_reference_reports_the_current_version() -> None:
    def edit(event: Annotated[ResourceRef, ResourceKind("event")]) -> None: ...

    spec = spec_from_function(edit, effect="write")
    assert isinstance(_check(spec, {"event": {"id": "e1", "version": "v2"}}).verdict, Accepted)
    err = _error(_check(spec, {"event": {"id": "e1", "version": "v1"}}))
    assert err.category == "stale_reference"
    assert err.current_version == "v2"
    gone = _error(_check(spec, {"event": {"id": "e9", "version": "v1"}}))
    assert gone.category == "stale_reference" and gone.current_version is None


TEAMS = [
    {"id": "t-1", "label": "Design (Shanghai)"},
    {"id": "t-2", "label": "Design (Berlin)"},
    {"id": "t-3", "label": "Platform"},
]


def _find_team(ctx: ValidationContext, value: Any) -> Sequence[Mapping[str, Any]]:
    if value in {t["id"] for t in TEAMS}:
        return [t for t in TEAMS if t["id"] == value]
    return [t for t in TEAMS if str(value).lower() in t["label"].lower()]


def test_a_name_matching_several_entities_is_ambiguous_never_the_first_match() -> None:
    spec = ToolSpec(
        name="invite",
        effect="write",
        fn=lambda team: None,
        input_schema={"type": "object", "properties": {"team": {"type": "string"}}, "required": ["team"]},
        bindings={"team": _find_team},
    )
    err = _error(_check(spec, {"team": "design"}))
    assert err.category == "ambiguous_reference"
    assert [c["id"] for c in err.candidates] == ["t-1", "t-2"]
    bound = _check(spec, {"team": "platform"})
    assert isinstance(bound.verdict, Accepted) and bound.arguments["team"] == "t-3"
    assert _error(_check(spec, {"team": "nobody"})).category == "invalid_arguments"


def test_high_risk_argument_inferred_by_the_model_needs_approval_but_user_given_does_not() -> None:
    spec = ToolSpec(
        name="send",
        effect="external",
        fn=lambda to, body: None,
        input_schema={"type": "object", "properties": {"to": {"type": "string"}, "body": {"type": "string"}}},
        high_risk_args=("to",),
    )
    inferred = _check(spec, {"to": "a@example.org", "body": "hi"})
    assert isinstance(inferred.verdict, NeedsApproval)
    assert inferred.verdict.details["rules"][0]["arguments"] == ["to"]
    given = _check(spec, {"to": "a@example.org", "body": "hi"}, {"to": "user"})
    assert isinstance(given.verdict, Accepted)


def test_business_validator_reads_state_and_can_reject_or_ask_for_approval() -> None:
    def over_limit(ctx: ValidationContext, args: Mapping[str, Any]) -> Rejected | NeedsApproval | None:
        if args["amount"] > 1000:
            return Rejected(ActionError.of("budget_exceeded", "over the limit"))
        if args["amount"] > 100:
            return NeedsApproval("large amount")
        return None

    spec = ToolSpec(
        name="pay",
        effect="external",
        fn=lambda amount: None,
        input_schema={"type": "object", "properties": {"amount": {"type": "number"}}},
        validators=(over_limit,),
    )
    assert isinstance(_check(spec, {"amount": 5}).verdict, Accepted)
    assert isinstance(_check(spec, {"amount": 500}).verdict, NeedsApproval)
    assert _error(_check(spec, {"amount": 5000})).category == "budget_exceeded"


@pytest.mark.parametrize("args", [None, [], "x", 3, 1.5, True])
def test_non_object_arguments_are_invalid_arguments(args: Any) -> None:
    result = _check(SCHEDULE, args)
    assert _error(result).category == "invalid_arguments"
    assert _paths(result) == [""]


def test_at_most_twenty_field_errors_are_reported_and_the_rest_counted() -> None:
    spec = ToolSpec(
        name="wide",
        effect="none",
        fn=lambda **kw: None,
        input_schema={"type": "object", "properties": {}, "additionalProperties": False},
    )
    err = _error(_check(spec, {f"k{i}": i for i in range(30)}))
    assert len(err.field_errors) == 20
    assert err.details["more_field_errors"] == 10


def test_an_object_of_a_hundred_thousand_unexpected_keys_is_read_only_as_far_as_it_is_reported() -> None:
    validator = jsonschema_rs.validator_for(
        {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False}
    )
    errors = schema_errors(validator, {f"k{i}": i for i in range(100_000)})
    assert 20 < len(errors) <= 4 * 20 + 1  # what _reject keeps, and a count past it
    assert errors[0] == FieldError(path="/k0", message="unexpected argument 'k0'")
