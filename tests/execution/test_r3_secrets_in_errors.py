"""Credentials in a tool's exception text never reach the model, the error's details, the trace or
the ledger: URL passwords, ``Authorization`` headers and API-key shapes are replaced by a fixed
placeholder wherever an exception's text becomes an error (mapped, retried, late, streamed)."""

from __future__ import annotations

import asyncio
import base64
import json
import string
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from actionspace import Runtime, ToolCall
from actionspace.catalog import RetryPolicy, ToolSpec
from actionspace.catalog.spec import NO_RETRY
from actionspace.errors import ActionError, ToolError
from actionspace.execution.errors import map_exception
from actionspace.execution.executor import Executor, Failed

ALNUM = string.ascii_letters + string.digits
SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
REDACTED = "***"


def test_a_url_password_in_an_unmapped_exception_is_redacted_and_the_rest_kept() -> None:
    exc = RuntimeError("connection to postgresql://admin:hunter2@db/x failed")
    error = map_exception(exc, side_effects=False)
    assert "hunter2" not in error.message
    assert f"postgresql://admin:{REDACTED}@db/x" in error.message
    assert error.message.startswith("RuntimeError: connection to")
    assert error.message.endswith("failed")


@pytest.mark.parametrize(
    ("text", "secret", "kept"),
    [
        ("got 401 with Authorization: Bearer abc.def-ghi_123", "abc.def-ghi_123", "Authorization: Bearer"),
        ("headers={'authorization': 'Basic dXNlcjpwYXNzd29yZA=='}", "dXNlcjpwYXNzd29yZA==", "Basic"),
        ("key sk-proj-AbCdEf0123456789xyz rejected", "sk-proj-AbCdEf0123456789xyz", "rejected"),
        (
            "token ghp_0123456789abcdefghijABCDEFGHIJklmnop bad",
            "ghp_0123456789abcdefghijABCDEFGHIJklmnop",
            "bad",
        ),
        ("aws AKIAIOSFODNN7EXAMPLE denied", "AKIAIOSFODNN7EXAMPLE", "denied"),
        ("slack xoxb-123456789012-abcdefABCDEF says no", "xoxb-123456789012-abcdefABCDEF", "says no"),
        ("GET https://api.example.com/v1?api_key=s3cr3tvalue&page=2", "s3cr3tvalue", "page=2"),
        ("dsn host=db user=admin password=hunter2 dbname=x", "hunter2", "dbname=x"),
    ],
)
def test_every_known_credential_shape_is_replaced_by_the_placeholder(
    text: str, secret: str, kept: str
) -> None:
    for exc in (RuntimeError(text), ValueError(text), ConnectionError(text), PermissionError(text)):
        error = map_exception(exc, side_effects=True)
        assert secret not in error.message
        assert REDACTED in error.message
        assert kept in error.message


def test_ordinary_text_is_left_as_it_is() -> None:
    from actionspace.errors import redact

    for text in (
        "connect to http://localhost:8080/x failed",
        "Bearer authentication is not configured",
        "basic validation failed for task-manager",
        "the user asked for sklearn and sk-learn",
    ):
        assert redact(text) == text


def test_a_secret_cut_by_the_message_limit_does_not_leak_a_prefix() -> None:
    text = "x" * 470 + " postgresql://admin:hunter2hunter2@db/x"
    error = map_exception(RuntimeError(text), side_effects=False)
    assert "hunter" not in error.message


def test_a_tool_error_message_and_details_are_redacted() -> None:
    raised = ToolError(
        "permanent",
        "vendor said: Authorization: Bearer tok_0123456789abcdef",
        details={"dsn": "mysql://root:toor1234@db:3306/app", "nested": ["sk-abcdefghijklmnop0123"]},
    )
    error = map_exception(raised, side_effects=True)
    text = json.dumps(error.to_dict())
    assert "tok_0123456789abcdef" not in text
    assert "toor1234" not in text
    assert "sk-abcdefghijklmnop0123" not in text
    assert error.category == "permanent"


def test_an_owners_mapper_is_redacted_by_the_executor() -> None:
    def mapper(exc: BaseException, *, side_effects: bool) -> ActionError:
        return ActionError.of("permanent", str(exc), details={"raw": str(exc)})

    def fails() -> None:
        raise ValueError("redis://:swordfish99@cache:6379 refused")

    spec = ToolSpec(name="t", input_schema=SCHEMA, fn=fails, effect="read", retry=NO_RETRY)
    executor = Executor(map_error=mapper)
    try:
        outcomes = [executor.run(spec, {}), asyncio.run(executor.arun(spec, {}))]
    finally:
        executor.close()
    for outcome in outcomes:
        assert isinstance(outcome, Failed)
        assert "swordfish99" not in json.dumps(outcome.error.to_dict())
        assert "redis://:***@cache:6379" in outcome.error.message


def test_the_last_error_of_exhausted_retries_is_redacted() -> None:
    rt = Runtime("memory://")
    calls: list[int] = []

    @rt.tool(effect="read", retry=RetryPolicy(max_attempts=2, deadline_s=5.0, initial_backoff_s=0.001))
    def flaky() -> str:
        """Always loses the connection."""
        calls.append(1)
        raise ConnectionError("reset by https://bot:pa55word-xyz@hooks.example.com")

    obs = rt.call(ToolCall(name="flaky", arguments={}), run_id="retry")
    assert len(calls) == 2
    assert obs.error is not None and obs.error.details.get("retries_exhausted") is True
    _assert_nowhere(rt, "retry", obs.to_dict(), "pa55word-xyz")


def test_a_streaming_tool_failing_midway_has_its_error_redacted() -> None:
    rt = Runtime("memory://")

    @rt.tool(effect="read")
    def feed() -> Iterator[str]:
        """Streams a line, then fails."""
        yield "one\n"
        raise RuntimeError("upstream Authorization: Bearer eyJhbGciOi.eyJzdWIiOiIx.c2lnbmF0dXJl")

    obs = rt.call(ToolCall(name="feed", arguments={}), run_id="stream")
    assert obs.error is not None
    _assert_nowhere(rt, "stream", obs.to_dict(), "eyJzdWIiOiIx")


def _assert_nowhere(rt: Runtime, run_id: str, observation: dict[str, Any], secret: str) -> None:
    assert secret not in json.dumps(observation, default=str)
    events = [e.to_dict() for e in rt.trace.events(run_id)]
    assert secret not in json.dumps(events, default=str)
    entries = [e.to_dict() for e in rt.ledger.list(limit=100_000)]
    assert secret not in json.dumps(entries, default=str)


# ---------------------------------------------------------------------- hostile text, any exception


class _HTTPResponse:
    def __init__(self, status: int) -> None:
        self.status_code = status
        self.headers: dict[str, str] = {}


class VendorHTTPError(Exception):
    """An HTTP client's error: a status on its response, the request in its text."""

    def __init__(self, text: str, status: int) -> None:
        super().__init__(text)
        self.response = _HTTPResponse(status)


def _secret() -> st.SearchStrategy[tuple[str, str]]:
    """(text holding a credential, the part that must never be shown)."""
    word = st.text(ALNUM, min_size=12, max_size=40).map(lambda s: "Q7" + s)
    user = st.text(ALNUM, min_size=1, max_size=8)
    scheme = st.sampled_from(["postgresql", "mysql", "redis", "https", "amqp", "mongodb+srv"])
    url = st.tuples(scheme, user, word).map(lambda t: (f"{t[0]}://{t[1]}:{t[2]}@db.internal:5432/x", t[2]))
    bearer = word.map(lambda w: (f"Authorization: Bearer {w}", w))
    basic = st.tuples(user, word).map(lambda t: base64.b64encode(f"{t[0]}:{t[1]}".encode()).decode())
    basic_header = basic.map(lambda b: (f"authorization: Basic {b}", b))
    keys = st.one_of(
        word.map(lambda w: (f"sk-{w}", w)),
        word.map(lambda w: (f"sk-proj-{w}", w)),
        st.text(ALNUM, min_size=36, max_size=36).map(lambda w: (f"ghp_{w}", w)),
        st.text(string.ascii_uppercase + string.digits, min_size=16, max_size=16).map(
            lambda w: (f"AKIA{w}", f"AKIA{w}")
        ),
        word.map(lambda w: (f"xoxb-1234-{w}", w)),
    )
    return st.one_of(url, bearer, basic_header, keys)


def _raise(kind: str, text: str) -> BaseException:
    if kind == "tool_error":
        return ToolError("permanent", text, details={"said": text})
    if kind == "http":
        return VendorHTTPError(text, 503)
    types: dict[str, type[Exception]] = {
        "runtime": RuntimeError,
        "value": ValueError,
        "key": KeyError,
        "os": OSError,
        "connection": ConnectionError,
        "refused": ConnectionRefusedError,
        "timeout": TimeoutError,
        "permission": PermissionError,
        "custom": type("VendorFault", (Exception,), {}),
    }
    return types[kind](text)


KINDS = [
    "tool_error",
    "http",
    "runtime",
    "value",
    "key",
    "os",
    "connection",
    "refused",
    "timeout",
    "permission",
]


@pytest.fixture(scope="module")
def hostile_runtime() -> Iterator[tuple[Runtime, list[BaseException]]]:
    rt = Runtime("memory://")
    raised: list[BaseException] = []

    def fails() -> None:
        raise raised[-1]

    for effect in ("read", "write"):
        rt.add_tool(name=f"fails_{effect}", input_schema=SCHEMA, fn=fails, effect=effect, retry=NO_RETRY)
    with rt:
        yield rt, raised


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    secret=_secret(),
    before=st.text(max_size=600),
    after=st.text(max_size=60),
    kind=st.sampled_from([*KINDS, "custom"]),
    effect=st.sampled_from(["read", "write"]),
    run=st.uuids(),
)
def test_no_credential_in_any_exception_reaches_the_observation_or_the_trace(
    hostile_runtime: tuple[Runtime, list[BaseException]],
    secret: tuple[str, str],
    before: str,
    after: str,
    kind: str,
    effect: str,
    run: object,
) -> None:
    rt, raised = hostile_runtime
    text, hidden = secret
    assume(hidden not in before and hidden not in after)  # only the credential may hold it
    raised.append(_raise(kind, f"{before} {text} {after}"))
    run_id = f"hostile-{run}"
    obs = rt.call(ToolCall(name=f"fails_{effect}", arguments={}), run_id=run_id)
    assert obs.error is not None
    assert hidden not in json.dumps(obs.error.details, default=str)
    assert hidden not in obs.error.message
    _assert_nowhere(rt, run_id, obs.to_dict(), hidden)
