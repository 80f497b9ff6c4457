from __future__ import annotations

from typing import Annotated, Any

import pytest

from actionspace.catalog import Catalog, ToolSpec, spec_from_function
from actionspace.errors import DuplicateToolError, ToolDefinitionError, UnknownToolError
from actionspace.validation.semantic import Currency, Money, Timestamp


def _noop(**_: Any) -> None:
    return None


def _spec(name: str = "t", version: str = "1", **kw: Any) -> ToolSpec:
    kw.setdefault("effect", "read")
    return ToolSpec(name=name, version=version, fn=_noop, **kw)


def test_duplicate_name_and_version_is_an_error_not_a_warning() -> None:
    cat = Catalog()
    cat.register(_spec())
    with pytest.raises(DuplicateToolError, match="t@1"):
        cat.register(_spec())


def test_new_version_becomes_current_and_old_one_stays_addressable() -> None:
    cat = Catalog()
    cat.register(_spec(version="1"))
    cat.register(
        _spec(version="2", input_schema={"type": "object", "properties": {"x": {"type": "integer"}}})
    )
    assert cat.get("t").version == "2"
    assert cat.get("t", "1").version == "1"
    assert cat.get("t", "1").schema_hash != cat.get("t", "2").schema_hash


def test_retired_versions_are_never_offered() -> None:
    cat = Catalog()
    cat.register(_spec(version="1"))
    cat.register(_spec(version="2"))
    cat.retire("t@2")
    assert [s.key for s in cat.offerable()] == ["t@1"]
    cat.retire("t@1")
    assert cat.offerable() == []
    with pytest.raises(UnknownToolError):
        cat.get("t")


def test_deprecation_names_the_successor_and_keeps_the_tool_offerable() -> None:
    cat = Catalog()
    cat.register(_spec())
    spec = cat.deprecate("t@1", by="t2")
    assert spec.lifecycle == "deprecated"
    assert spec.deprecated_by == "t2"
    assert [s.key for s in cat.offerable()] == ["t@1"]


def test_defaults_follow_the_declared_effect() -> None:
    assert _spec(effect="read").risk == "low"
    assert _spec(effect="write").risk == "medium"
    assert _spec(effect="external").risk == "high"
    assert _spec(effect="external").reversible is False
    assert _spec(effect="read").reversible is True
    assert _spec(name="send", effect="external").scopes == ("external:send",)
    assert _spec(effect="none").blocking is False
    assert _spec(effect="read").blocking is True


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"effect": "delete"}, "effect must be one of"),
        ({"risk": "extreme"}, "risk must be one of"),
        ({"idempotency": "query"}, "needs a status_query"),
        ({"input_schema": {"type": "array"}}, "must describe an object"),
        ({"name": "a@b"}, "contain no '@'"),
        ({"timeout_s": 0}, "timeout_s"),
        ({"effect": "write", "writes": ["doc:{name"]}, "resource template 'doc:{name'"),
        ({"effect": "read", "reads": ["doc:{name}}"]}, "resource template"),
    ],
)
def test_invalid_definitions_are_rejected_at_definition_time(kw: dict[str, Any], message: str) -> None:
    with pytest.raises(ToolDefinitionError, match=message):
        _spec(**kw)


def test_function_tool_schema_comes_from_hints_and_docstring() -> None:
    def book(
        room: str,
        seats: int,
        price: Annotated[Money, Currency("EUR")],
        start: Timestamp,
        note: str | None = None,
    ) -> dict[str, Any]:
        """Book a meeting room.

        Holds the room until cancelled.

        Args:
            room: Room id, e.g. "r-101".
            seats: How many seats
                are needed.
        """
        return {}

    spec = spec_from_function(book, effect="write")
    schema = spec.input_schema
    assert spec.summary == "Book a meeting room."
    assert "Holds the room" in spec.description and "Args" not in spec.description
    assert schema["required"] == ["room", "seats", "price", "start"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["room"] == {"description": 'Room id, e.g. "r-101".', "type": "string"}
    assert schema["properties"]["seats"]["description"] == "How many seats are needed."
    assert schema["properties"]["price"]["x-actionspace"] == {"type": "money", "currency": "EUR"}
    assert schema["properties"]["start"]["x-actionspace"] == {"type": "timestamp"}
    assert schema["properties"]["note"]["default"] is None
    assert spec.coerce is not None


def test_plain_json_typed_functions_need_no_conversion() -> None:
    def add(a: int, b: int) -> int:
        return a + b

    assert spec_from_function(add, effect="none").coerce is None


def test_function_tools_must_declare_their_effect_and_type_every_parameter() -> None:
    def f(a: int) -> int:
        return a

    def g(a) -> int:  # type: ignore[no-untyped-def]
        return 1

    def h(*args: int) -> int:
        return 1

    with pytest.raises(ToolDefinitionError, match="declare effect"):
        spec_from_function(f)
    with pytest.raises(ToolDefinitionError, match="needs a type hint"):
        spec_from_function(g, effect="none")
    with pytest.raises(ToolDefinitionError, match=r"\*args"):
        spec_from_function(h, effect="none")


def test_idempotency_key_parameter_is_hidden_from_the_model() -> None:
    def pay(amount: int, idempotency_key: str) -> None:
        return None

    spec = spec_from_function(pay, effect="external", idempotency="native")
    assert set(spec.input_schema["properties"]) == {"amount"}
