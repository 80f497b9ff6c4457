"""Stored offer pins, whatever their form: the earlier ``[version, schema hash]`` is judged as it
was, a whole pin also by the definition, and anything else is refused, never a crash."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.catalog.registry import Catalog
from actionspace.catalog.spec import ToolSpec
from actionspace.discovery.runs import RunState, definition_hash, pin_of, resolve
from actionspace.errors import ActionError

_SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}}


def _catalog(description: str = "Echo the text.") -> tuple[Catalog, ToolSpec]:
    catalog = Catalog()
    spec = catalog.register(
        ToolSpec(name="echo", description=description, input_schema=_SCHEMA, effect="read", fn=lambda **a: a)
    )
    return catalog, spec


def _restored(pins: Any, *, explicit: bool = True) -> RunState:
    data = {"principal": {"id": "alice", "scopes": ["read:*"]}, "pins": pins, "explicit_offer": explicit}
    return RunState.restore("run-1", data, itertools.count(1), 1)


def test_w19_a_pin_holds_the_definition_and_a_changed_description_under_one_version_is_refused() -> None:
    _, before = _catalog("Echo the text.")
    catalog, after = _catalog("Echo the text, then send it to everyone.")
    assert before.key == after.key and before.schema_hash == after.schema_hash
    run = _restored({"echo": list(pin_of(before))})
    found = resolve(catalog, run, "echo")
    assert isinstance(found, ActionError) and found.category == "version_mismatch"
    assert found.details["offered_schema_hash"] == before.schema_hash
    assert found.details["offered_definition_hash"] == definition_hash(before)
    assert found.details["current_definition_hash"] == definition_hash(after)
    assert resolve(catalog, run, "echo") is after  # re-pinned to the current definition


def test_w19_the_definition_hash_is_the_same_for_equal_definitions_and_ignores_the_version_label() -> None:
    _, one = _catalog()
    _, two = _catalog()
    assert definition_hash(one) == definition_hash(two)
    assert definition_hash(one.evolve(version="2")) == definition_hash(one)
    assert definition_hash(one.evolve(requires_approval=True)) != definition_hash(one)
    assert definition_hash(one.evolve(output_schema={"type": "string"})) != definition_hash(one)


_PARTS = st.one_of(
    st.sampled_from(["1", "2", "", 1]),
    st.text(max_size=20),
    st.none(),
    st.integers(),
    st.floats(allow_nan=True),
)
_PINS = st.one_of(
    st.lists(_PARTS, max_size=4),
    _PARTS,
    st.dictionaries(st.text(max_size=5), _PARTS, max_size=3),
)


@settings(max_examples=200, deadline=None)
@given(pin=_PINS, explicit=st.booleans(), legacy_hash=st.booleans())
def test_w19_any_stored_pin_loads_and_is_never_silently_accepted_unless_it_matches(
    pin: Any, explicit: bool, legacy_hash: bool
) -> None:
    catalog, spec = _catalog()
    if legacy_hash and isinstance(pin, list) and len(pin) >= 2:
        pin[1] = spec.schema_hash  # often the earlier form of a pin of the tool as it is
    run = _restored({"echo": pin}, explicit=explicit)
    found = resolve(catalog, run, "echo")
    matches = (
        isinstance(pin, list)
        and len(pin) in (2, 3)
        and str(pin[0]) == spec.version
        and str(pin[1]) == spec.schema_hash
        # an earlier two-part pin is saved back with an empty third part until the run pins the tool
        # again, so ``[version, schema hash, ""]`` is that earlier form, judged by the first two
        and (len(pin) == 2 or str(pin[2]) in ("", definition_hash(spec)))
    )
    if matches:
        assert found is spec
        assert run.pins["echo"] == pin_of(spec)  # an earlier pin is kept whole from then on
    else:
        assert isinstance(found, ActionError) and found.category == "version_mismatch"
