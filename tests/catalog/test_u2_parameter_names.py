"""Parameters named like pydantic's own attributes reach the function under their own names."""

from __future__ import annotations

import datetime
import warnings
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Runtime


def test_a_parameter_named_model_config_is_offered_and_passed() -> None:
    def configure(model_config: str, schema: str, json: int, copy: bool, dict: str) -> str:
        return f"{model_config}|{schema}|{json}|{copy}|{dict}"

    rt = Runtime()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rt.tool(configure, effect="none")
    props = rt.catalog.get("configure").input_schema["properties"]
    assert set(props) == {"model_config", "schema", "json", "copy", "dict"}
    args = {"model_config": "m", "schema": "s", "json": 1, "copy": True, "dict": "d"}
    obs = rt.call({"name": "configure", "arguments": args})
    assert obs.error is None, obs.error
    assert obs.data == "m|s|1|True|d"


def test_protected_and_underscored_names_register_and_keep_typed_values() -> None:
    def stamp(model_dump: datetime.date, _when: datetime.datetime, model_fields: int = 2) -> str:
        return f"{type(model_dump).__name__}|{type(_when).__name__}|{model_fields}"

    rt = Runtime()
    rt.tool(stamp, effect="none")
    schema = rt.catalog.get("stamp").input_schema
    assert set(schema["properties"]) == {"model_dump", "_when", "model_fields"}
    assert set(schema["required"]) == {"model_dump", "_when"}
    obs = rt.call(
        {"name": "stamp", "arguments": {"model_dump": "2024-01-02", "_when": "2024-01-02T03:04:05Z"}}
    )
    assert obs.error is None, obs.error
    assert obs.data == "date|datetime|2"


_NAME = st.sampled_from(
    ["model_config", "model_dump", "model_validate", "model_fields", "schema", "json", "copy", "dict",
     "construct", "validate", "_x", "__y", "fields", "self", "type", "id", "from_"]
)  # fmt: skip


@settings(max_examples=25, deadline=None)
@given(names=st.lists(_NAME, min_size=1, max_size=4, unique=True), values=st.data())
def test_any_mix_of_awkward_names_round_trips(names: list[str], values: Any) -> None:
    params = ", ".join(f"{n}: int" for n in names)
    body = "{" + ", ".join(f"{n!r}: {n}" for n in names) + "}"
    scope: dict[str, Any] = {}
    exec(f"def awkward({params}):\n    return {body}\n", scope)
    rt = Runtime()
    rt.tool(scope["awkward"], effect="none")
    args = {n: values.draw(st.integers(-(2**31), 2**31)) for n in names}
    obs = rt.call({"name": "awkward", "arguments": args})
    assert obs.error is None, obs.error
    assert obs.data == args
