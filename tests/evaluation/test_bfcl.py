from __future__ import annotations

import shutil
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest

from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ActionError, ToolDefinitionError
from actionspace.evaluation import bfcl
from actionspace.evaluation.bfcl import (
    CATEGORIES,
    JSON_SCHEMA_DRAFT,
    BfclAnswerError,
    BfclDataError,
    first_answer,
    json_pointer,
    mutations,
    to_input_schema,
    to_tool_spec,
)
from actionspace.runtime import Runtime
from actionspace.types import ToolCall

_BOOL_AS_STRING_ENUM = "is a string enum ('True', 'False', 'dontcare'); the answer gives boolean true"
_INT_AS_STRING_ENUM = (
    "number_of_rooms is a string enum ('1', '2', '3', 'dontcare'); the answer gives an integer"
)

KNOWN_DATA_DEFECTS: dict[str, str] = {
    "parallel_multiple_21#1": "x and y are arrays of float; the answer gives the Python expressions "
    "\"data['sales']\" and \"data['future_sales']\" as strings",
    "parallel_multiple_26#1": "bank.calculate_balance has no argument 'type'; the answer passes 'credit'",
    "parallel_multiple_94#0": "sort_list.elements is an array of integer; the answer sorts fruit names",
    "live_simple_106-63-0#0": "auto_loan_payment_start and bank_hours_start list no acceptable value ([]): "
    "not even BFCL's own checker can accept a call",
    "live_simple_112-68-0#0": "acc_routing_start, atm_finder_start, faq_link_accounts_start, "
    "get_balance_start and get_transactions_start list no acceptable value ([])",
    "live_multiple_87-38-4#0": "type='openai' is outside the doc's enum (all, postgres, openapi, graphql)",
    "live_multiple_552-153-1#0": f"is_unisex {_BOOL_AS_STRING_ENUM}",
    "live_multiple_595-158-1#0": _INT_AS_STRING_ENUM,
    "live_multiple_596-158-2#0": _INT_AS_STRING_ENUM,
    "live_multiple_731-167-2#0": f"in_unit_laundry {_BOOL_AS_STRING_ENUM}",
    "live_multiple_733-167-4#0": f"in_unit_laundry {_BOOL_AS_STRING_ENUM}",
    "live_multiple_735-167-6#0": f"in_unit_laundry {_BOOL_AS_STRING_ENUM}",
    "live_multiple_750-169-5#0": "genre='Any' is outside the doc's enum of 17 genres",
    "live_multiple_756-169-11#0": "genre='horror' is outside the doc's enum (which has 'Horror')",
    "live_multiple_835-178-10#0": "genre='Reggaeton' is outside the doc's enum",
    "live_multiple_862-181-3#0": "Trains_1_FindTrains declares no argument 'journey_start_time'",
    "live_multiple_871-182-8#0": "genre='Play' is outside the doc's enum",
    "live_multiple_947-197-0#0": "duration='5 minutes' is outside the doc's enum of five durations",
    "live_multiple_964-207-0#0": "passes 'question', which the doc does not declare, "
    "instead of the required 'statement'",
    "live_multiple_1038-265-0#0": "start_date is typed string; the answer's only value is null",
    "live_multiple_1041-268-0#0": "t0 and t1 are typed string; the answer lists null first for both",
    "live_parallel_multiple_2-2-0#1": "the bedroom air purifier command is outside the doc's enum of three",
}
"""Every ground-truth call the runtime rejects (``<entry id>#<call index>``) and why it is BFCL's defect."""


# ---------------------------------------------------------------- converter


def _schema(properties: Mapping[str, Any], required: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    return to_input_schema({"type": "dict", "properties": properties, "required": required or [], **extra})


def test_bfcl_types_become_json_schema_types() -> None:
    schema = _schema(
        {
            "d": {"type": "dict", "properties": {"f": {"type": "float"}}},
            "t": {"type": "tuple", "items": {"type": "float"}},
            "a": {"type": "any", "description": "anything"},
            "i": {"type": "integer"},
            "s": {"type": "string"},
            "b": {"type": "boolean"},
            "l": {"type": "array", "items": {"type": "string"}},
        }
    )
    props = schema["properties"]
    assert props["d"] == {"type": "object", "properties": {"f": {"type": "number"}}}
    assert props["t"] == {"type": "array", "items": {"type": "number"}}
    assert props["a"] == {"description": "anything"}
    assert [props[k]["type"] for k in "isbl"] == ["integer", "string", "boolean", "array"]
    assert schema["$schema"] == JSON_SCHEMA_DRAFT
    assert jsonschema_rs.meta.is_valid(schema)


def test_only_the_top_level_forbids_arguments_the_doc_does_not_declare() -> None:
    schema = _schema(
        {"o": {"type": "dict", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}, ["o"]
    )
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["o"]
    assert "additionalProperties" not in schema["properties"]["o"]
    assert schema["properties"]["o"]["required"] == ["x"]
    validator = jsonschema_rs.validator_for(schema)
    assert validator.is_valid({"o": {"x": 1, "y": 2}})
    assert not validator.is_valid({"o": {"x": 1}, "p": 1})
    assert not validator.is_valid({"o": {"y": 2}})


def test_every_stated_constraint_is_kept() -> None:
    prop = {"type": "integer", "enum": [1, 2], "default": 1, "maximum": 400, "description": "fee"}
    date = {"type": "string", "format": "date"}
    schema = _schema({"fee": prop, "date": date})
    assert schema["properties"]["fee"] == prop
    assert schema["properties"]["date"] == date


def test_optional_flags_fold_into_required_and_are_dropped() -> None:
    schema = _schema(
        {
            "a": {"type": "string"},
            "b": {"type": "string", "optional": True},
            "c": {"type": "string", "optional": "True"},
        },
        ["a"],
        optional=["b"],
    )
    assert schema["required"] == ["a"]
    assert all("optional" not in p for p in schema["properties"].values())
    assert "optional" not in schema


def test_an_optional_flag_that_contradicts_required_is_refused() -> None:
    with pytest.raises(ToolDefinitionError, match="optional"):
        _schema({"a": {"type": "string", "optional": True}}, ["a"])
    with pytest.raises(ToolDefinitionError, match="optional"):
        _schema({"a": {"type": "string"}}, ["a"], optional=["a"])


def test_an_enum_on_an_array_constrains_its_items() -> None:
    schema = _schema({"m": {"type": "array", "items": {"type": "string"}, "enum": ["co2", "noise"]}})
    assert schema["properties"]["m"] == {
        "type": "array",
        "items": {"type": "string", "enum": ["co2", "noise"]},
    }
    validator = jsonschema_rs.validator_for(schema)
    assert validator.is_valid({"m": ["co2", "noise"]})
    assert not validator.is_valid({"m": ["co2", "pm10"]})


@pytest.mark.parametrize(
    "prop",
    [{"type": "String"}, {"type": "complex"}, {"type": "string", "nullable": True}, {"type": ["string"]}],
)
def test_unknown_types_and_keywords_are_refused_rather_than_dropped(prop: dict[str, Any]) -> None:
    with pytest.raises(ToolDefinitionError):
        _schema({"p": prop})


def test_parameters_must_describe_a_dict() -> None:
    with pytest.raises(ToolDefinitionError, match="dict"):
        to_input_schema({"type": "array", "items": {"type": "string"}})


def test_dotted_function_names_are_kept_as_tool_names() -> None:
    spec = to_tool_spec(
        {
            "name": "math.factorial",
            "description": "Factorial.",
            "parameters": {
                "type": "dict",
                "properties": {"number": {"type": "integer"}},
                "required": ["number"],
            },
        }
    )
    assert isinstance(spec, ToolSpec)
    assert (spec.name, spec.key, spec.effect, spec.description) == (
        "math.factorial",
        "math.factorial@1",
        "none",
        "Factorial.",
    )


# ---------------------------------------------------------------- ground truth

DOC = {
    "name": "book",
    "parameters": {
        "type": "dict",
        "properties": {
            "city": {"type": "string"},
            "nights": {"type": "integer"},
            "unit": {"type": "string"},
            "guest": {
                "type": "dict",
                "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
                "required": ["name"],
            },
            "rooms": {
                "type": "array",
                "items": {"type": "dict", "properties": {"beds": {"type": "integer"}}},
            },
            "where": {"type": "dict", "properties": {"pos": {"type": "dict"}}},
        },
        "required": ["city", "nights"],
    },
}


def _answer(**arguments: list[Any]) -> ToolCall:
    return first_answer({"book": arguments}, [DOC])


def test_the_first_listed_value_of_each_argument_is_taken() -> None:
    call = _answer(city=["Paris", "paris"], nights=[2, 3], unit=["metric", ""])
    assert call == ToolCall(name="book", arguments={"city": "Paris", "nights": 2, "unit": "metric"})


def test_an_optional_argument_whose_first_option_is_empty_is_omitted() -> None:
    assert _answer(city=["Paris"], nights=[2], unit=["", "metric"]).arguments == {
        "city": "Paris",
        "nights": 2,
    }


def test_a_required_argument_whose_first_option_is_empty_takes_the_next_option() -> None:
    assert _answer(city=["", "Paris"], nights=["", 2]).arguments == {"city": "Paris", "nights": 2}


def test_a_required_argument_whose_only_option_is_empty_keeps_the_empty_string() -> None:
    assert _answer(city=[""], nights=[2]).arguments == {"city": "", "nights": 2}


def test_dict_arguments_are_read_one_level_deep_by_the_same_rule() -> None:
    call = _answer(
        city=["Paris"],
        nights=[2],
        guest=[{"name": ["", "Ada"], "age": ["", 36]}],
        rooms=[[{"beds": [2, 1]}, {"beds": ["", 1]}]],
        where=[{"pos": [{"lat": [1], "lon": 2}]}],
    )
    assert call.arguments["guest"] == {"name": "Ada"}
    assert call.arguments["rooms"] == [{"beds": 2}, {}]
    assert call.arguments["where"] == {"pos": {"lat": [1], "lon": 2}}


def test_arguments_the_doc_does_not_declare_are_kept_for_the_validator_to_report() -> None:
    assert _answer(city=["Paris"], nights=[2], stray=[1]).arguments["stray"] == 1
    assert "stray" not in _answer(city=["Paris"], nights=[2], stray=["", 1]).arguments


def test_an_argument_with_no_acceptable_value_cannot_be_built() -> None:
    with pytest.raises(BfclAnswerError, match="nights"):
        _answer(city=["Paris"], nights=[])


# ---------------------------------------------------------------- mutations

SCHEMA = to_input_schema(
    {
        "type": "dict",
        "properties": {
            "city": {"type": "string"},
            "nights": {"type": "integer"},
            "unit": {"type": "string", "enum": ["metric", "imperial"]},
            "tags": {"type": "array", "items": {"type": "string"}, "enum": ["a", "b"]},
            "a/b": {"type": "boolean"},
        },
        "required": ["nights", "city"],
    }
)


def _by_kind(call: ToolCall, schema: Mapping[str, Any] = SCHEMA) -> dict[str, Any]:
    return {m.kind: m for m in mutations(call, schema, tool_names=["book", "book_x"])}


def test_each_mutation_changes_one_thing_and_names_the_path_it_breaks() -> None:
    call = ToolCall(name="book", arguments={"city": "Paris", "nights": 2})
    found = _by_kind(call)
    assert found["drop_required"].call.arguments == {"city": "Paris"}
    assert found["drop_required"].path == "/nights"
    assert (found["rename_tool"].call.name, found["rename_tool"].category) == ("book_x_x", "unknown_tool")
    assert found["unknown_argument"].call.arguments == {
        "city": "Paris",
        "nights": 2,
        "unexpected_argument": "x",
    }
    assert found["wrong_type"].call.arguments == {"city": 12345, "nights": 2}
    assert found["wrong_type"].path == "/city"
    assert found["out_of_enum"].call.arguments == {"city": "Paris", "nights": 2, "unit": "not_in_enum_0"}
    assert found["out_of_enum"].path == "/unit"
    assert {m.category for k, m in found.items() if k != "rename_tool"} == {"invalid_arguments"}


def test_an_enum_on_array_items_is_mutated_at_the_item() -> None:
    schema = {**SCHEMA, "properties": {k: v for k, v in SCHEMA["properties"].items() if k != "unit"}}
    found = _by_kind(ToolCall(name="book", arguments={"city": "P", "nights": 1}), schema)
    assert found["out_of_enum"].call.arguments["tags"] == ["not_in_enum_0"]
    assert found["out_of_enum"].path == "/tags/0"


def test_mutations_without_material_are_not_generated() -> None:
    schema = to_input_schema({"type": "dict", "properties": {"x": {"type": "any"}}, "required": []})
    found = _by_kind(ToolCall(name="f", arguments={"x": 1}), schema)
    assert sorted(found) == ["rename_tool", "unknown_argument"]


def test_paths_are_escaped_json_pointers() -> None:
    assert json_pointer("a/b", "c~d", 0) == "/a~1b/c~0d/0"
    found = _by_kind(ToolCall(name="book", arguments={"a/b": True, "city": "P", "nights": 1}))
    assert found["wrong_type"].path == "/a~1b"


def _observe(runtime: Runtime, call: ToolCall) -> ActionError | None:
    observation = runtime.call(call)
    return observation.error if observation.status == "error" else None


def test_the_runtime_answers_each_mutation_with_its_category_and_path() -> None:
    def echo(**arguments: Any) -> dict[str, Any]:
        return arguments

    with Runtime("memory://") as runtime:
        runtime.add_tool(name="hotel.book", input_schema=SCHEMA, fn=echo, effect="none")
        call = ToolCall(name="hotel.book", arguments={"city": "Paris", "nights": 2, "unit": "metric"})
        observation = runtime.call(call)
        assert observation.status == "ok", observation.error
        assert observation.data == call.arguments
        for mutation in mutations(call, SCHEMA, tool_names=["hotel.book"]):
            error = _observe(runtime, mutation.call)
            assert error is not None and error.category == mutation.category, mutation
            if mutation.path is not None:
                assert {f.path for f in error.field_errors} == {mutation.path}, mutation


# ---------------------------------------------------------------- data


def test_the_cache_root_follows_actionspace_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ACTIONSPACE_CACHE", str(tmp_path))
    assert bfcl.default_cache_dir() == tmp_path / "bfcl"
    monkeypatch.delenv("ACTIONSPACE_CACHE")
    assert bfcl.default_cache_dir() == Path.home() / ".cache" / "actionspace" / "bfcl"


@pytest.fixture(scope="module")
def data_dir() -> Path:
    return bfcl.fetch()


@pytest.fixture
def wheel(data_dir: Path) -> Path:
    return data_dir.parents[2] / f"bfcl_eval-{bfcl.BFCL_VERSION}-py3-none-any.whl"


def test_fetch_unpacks_only_the_data_once(wheel: Path, tmp_path: Path) -> None:
    shutil.copy(wheel, tmp_path / wheel.name)
    data = bfcl.fetch(tmp_path)
    assert data == tmp_path / f"bfcl_eval-{bfcl.BFCL_VERSION}" / "bfcl_eval" / "data"
    assert (data / "BFCL_v4_simple_python.json").is_file()
    assert not list(data.parents[1].rglob("*.py"))
    marker = data / "BFCL_v4_simple_python.json"
    marker.write_text("")
    assert bfcl.fetch(tmp_path) == data
    assert marker.read_text() == ""


def test_fetch_refuses_a_wheel_that_is_not_the_pinned_one(tmp_path: Path) -> None:
    with zipfile.ZipFile(tmp_path / f"bfcl_eval-{bfcl.BFCL_VERSION}-py3-none-any.whl", "w") as archive:
        archive.writestr("bfcl_eval/data/BFCL_v4_simple_python.json", "{}")
    with pytest.raises(BfclDataError, match="sha256"):
        bfcl.fetch(tmp_path)


def test_every_category_pairs_each_question_with_its_possible_answer(data_dir: Path) -> None:
    entries = bfcl.load_all(data_dir)
    assert {c: len(e) for c, e in entries.items()} == {
        "simple_python": 400,
        "multiple": 200,
        "parallel": 200,
        "parallel_multiple": 200,
        "live_simple": 258,
        "live_multiple": 1053,
        "live_parallel": 16,
        "live_parallel_multiple": 24,
    }
    assert sum(len(e.ground_truth) for es in entries.values() for e in es) == 3152
    first = entries["simple_python"][0]
    assert (first.id, first.category, first.functions[0]["name"]) == (
        "simple_python_0",
        "simple_python",
        "calculate_triangle_area",
    )


def test_an_unknown_category_is_refused(data_dir: Path) -> None:
    with pytest.raises(BfclDataError, match="category"):
        bfcl.load("simple_java", data_dir)


# ---------------------------------------------------------------- the whole suite


@pytest.fixture(scope="module")
def report(data_dir: Path) -> Iterator[dict[str, Any]]:
    yield bfcl.run_bfcl_checks(data_dir)


@pytest.mark.slow
def test_every_bfcl_doc_loads_as_a_valid_draft_2020_12_tool(report: dict[str, Any]) -> None:
    docs = report["docs"]
    assert docs["failures"] == {}
    assert (docs["loaded"], docs["total"]) == (6226, 6226)
    assert set(docs["by_category"]) == set(CATEGORIES)


@pytest.mark.slow
def test_the_runtime_rejects_exactly_the_known_ground_truth_defects(report: dict[str, Any]) -> None:
    truth = report["ground_truth"]
    assert set(truth["rejected"]) == set(KNOWN_DATA_DEFECTS)
    assert truth["total"] == 3152
    assert truth["accepted"] == 3152 - len(KNOWN_DATA_DEFECTS)
    assert truth["accepted"] >= 3126


@pytest.mark.slow
def test_every_mutation_gets_its_specific_error(report: dict[str, Any]) -> None:
    first_calls_accepted = 2351 - sum(1 for k in KNOWN_DATA_DEFECTS if k.endswith("#0"))
    for kind, tally in report["mutations"].items():
        assert tally["misses"] == {}, kind
        assert tally["rejected_as_expected"] == tally["generated"] > 0, kind
        assert tally["rate"] == 1.0, kind
    assert report["mutations"]["rename_tool"]["generated"] == first_calls_accepted
    assert report["mutations"]["unknown_argument"]["generated"] == first_calls_accepted


@pytest.mark.slow
def test_the_report_prints_one_fact_per_line(report: dict[str, Any]) -> None:
    text = bfcl.format_bfcl_report(report)
    assert f"ground truth accepted: {3152 - len(KNOWN_DATA_DEFECTS)}/3152" in text
    assert "docs loaded: 6226/6226" in text
    assert all(f"rejected {k}: " in text for k in KNOWN_DATA_DEFECTS)
