"""The MCP adapter's one error mapping: every error it knows has a category; unknowns are unclassified."""

from __future__ import annotations

import mcp_types.jsonrpc as jsonrpc
import pytest
from mcp import InputRequiredRoundsExceededError
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ValidationError

from actionspace.adapters._mcp_errors import (
    JSONRPC_CODES,
    LOCAL_FAILURES,
    RESOURCE_NOT_FOUND,
    InputRefused,
    ServerUnavailable,
    ToolChanged,
    ToolChangedDuringCall,
    map_call_error,
    map_jsonrpc_error,
    map_tool_error_result,
)
from actionspace.errors import CATEGORIES


def _sdk_error_codes() -> dict[str, int]:
    return {
        name: value
        for name, value in vars(jsonrpc).items()
        if name.isupper() and isinstance(value, int) and -32768 <= value <= -32000
    }


def test_every_error_code_the_sdk_defines_is_mapped() -> None:
    codes = _sdk_error_codes()
    assert len(codes) >= 10  # the SDK still exports its table where we look for it
    missing = {name: code for name, code in codes.items() if code not in JSONRPC_CODES}
    assert missing == {}
    assert RESOURCE_NOT_FOUND in JSONRPC_CODES


@pytest.mark.parametrize("code", sorted(JSONRPC_CODES))
@pytest.mark.parametrize("side_effects", [False, True])
def test_each_known_code_maps_to_its_table_category(code: int, side_effects: bool) -> None:
    name, read_category, write_category = JSONRPC_CODES[code]
    error = map_jsonrpc_error(MCPError(code, f"boom {name}", {"hint": "x"}), side_effects=side_effects)
    assert error.category == (write_category if side_effects else read_category)
    assert error.category in CATEGORIES
    assert error.vendor_code == f"jsonrpc:{code}"
    assert error.details["error"] == name
    assert error.details["data"] == {"hint": "x"}


def test_a_known_code_is_never_left_unclassified_unless_the_outcome_is_truly_unknown() -> None:
    unclassified = {code for code, (_, r, w) in JSONRPC_CODES.items() if "unclassified" in (r, w)}
    # Only a server-side internal error of a read is genuinely unknown (a write is unknown_commit).
    assert unclassified == {jsonrpc.INTERNAL_ERROR}


def test_an_unknown_code_is_unclassified_and_keeps_the_vendor_code() -> None:
    error = map_jsonrpc_error(MCPError(-31999, "odd"), side_effects=False)
    assert error.category == "unclassified"
    assert error.vendor_code == "jsonrpc:-31999"
    assert error.retryable is False


def test_a_lost_answer_of_a_write_is_unknown_commit_and_of_a_read_transient() -> None:
    for code in (jsonrpc.CONNECTION_CLOSED, jsonrpc.REQUEST_TIMEOUT):
        assert map_call_error(MCPError(code, "gone"), side_effects=True).category == "unknown_commit"
        read = map_call_error(MCPError(code, "gone"), side_effects=False)
        assert read.category == "transient"
        assert read.retryable


class _Shape(BaseModel):
    n: int


def _instances() -> dict[type[BaseException], BaseException]:
    try:
        _Shape.model_validate({"n": "x"})
    except ValidationError as exc:
        invalid = exc
    import anyio

    return {
        ServerUnavailable: ServerUnavailable("down"),
        anyio.ClosedResourceError: anyio.ClosedResourceError(),
        anyio.BrokenResourceError: anyio.BrokenResourceError(),
        anyio.EndOfStream: anyio.EndOfStream(),
        ConnectionError: ConnectionResetError("reset"),
        ValidationError: invalid,
        InputRefused: InputRefused("the server asked for input this client does not offer"),
        InputRequiredRoundsExceededError: InputRequiredRoundsExceededError(10),
        ToolChanged: ToolChanged("t@1 changed on the server before the call was sent"),
        ToolChangedDuringCall: ToolChangedDuringCall("the server announced a change of the tool"),
    }


@pytest.mark.parametrize("side_effects", [False, True])
def test_every_local_failure_is_mapped(side_effects: bool) -> None:
    instances = _instances()
    assert set(instances) == {entry[0] for entry in LOCAL_FAILURES}
    for exc_type, name, read_category, write_category in LOCAL_FAILURES:
        error = map_call_error(instances[exc_type], side_effects=side_effects)
        assert error.category == (write_category if side_effects else read_category), name
        assert error.vendor_code == name


def test_nothing_sent_is_never_unknown_commit() -> None:
    assert map_call_error(ServerUnavailable("down"), side_effects=True).category == "transient"
    assert map_call_error(ToolChanged("t@1 changed"), side_effects=True).category == "version_mismatch"


def test_a_broken_output_schema_is_permanent_for_a_read_and_unknown_commit_for_a_write() -> None:
    exc = RuntimeError("Invalid structured content returned by tool x: 1 is not a string")
    assert map_call_error(exc, side_effects=False).category == "permanent"
    assert map_call_error(exc, side_effects=True).category == "unknown_commit"


def test_an_unknown_exception_is_unclassified() -> None:
    error = map_call_error(KeyError("k"), side_effects=True)
    assert error.category == "unclassified"
    assert error.vendor_code == "KeyError"


def test_an_is_error_result_is_unclassified_with_the_tools_words() -> None:
    error = map_tool_error_result("Invalid timezone", None, trusted=True)
    assert error.category == "unclassified"
    assert error.message == "Invalid timezone"
    assert error.vendor_code == "isError"


def test_a_trusted_server_may_name_the_category_of_its_error() -> None:
    structured = {"category": "conflict", "message": "slot taken", "alternatives": ["10:00"]}
    error = map_tool_error_result("slot taken", structured, trusted=True)
    assert error.category == "conflict"
    assert error.alternatives == ("10:00",)


def test_an_untrusted_servers_claimed_category_never_makes_a_call_retryable() -> None:
    error = map_tool_error_result("try again", {"category": "transient"}, trusted=False)
    assert error.category == "unclassified"
    assert error.retryable is False
    assert error.details["claimed_category"] == "transient"


def test_a_malformed_error_object_from_a_trusted_server_is_unclassified() -> None:
    error = map_tool_error_result("bad", {"category": "conflict", "field_errors": [{"x": 1}]}, trusted=True)
    assert error.category == "unclassified"


def test_an_output_schema_the_sdk_cannot_use_fails_after_the_answer_so_a_write_is_unknown_commit() -> None:
    """The SDK checks the result only once the server answered: a write may have committed."""
    exc = RuntimeError("Invalid schema for tool x: 'nonsense' is not valid under any of the given schemas")
    assert map_call_error(exc, side_effects=True).category == "unknown_commit"
    assert map_call_error(exc, side_effects=False).category == "permanent"
    assert map_call_error(exc, side_effects=True).vendor_code == "output_schema"
