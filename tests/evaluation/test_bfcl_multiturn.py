from __future__ import annotations

import asyncio
import copy
import inspect
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest

from actionspace.evaluation import _bfcl_data
from actionspace.evaluation._bfcl_mt_backends import (
    BACKENDS,
    instantiate,
    load_docs,
    parse_call,
    public_methods,
    signatures,
    tool_specs,
)
from actionspace.evaluation.bfcl_multiturn import (
    MULTI_TURN_CATEGORIES,
    MultiTurnEntry,
    load_multiturn,
    replay_entry,
    run_multiturn,
)


@pytest.fixture(scope="module")
def data() -> Path:
    return _bfcl_data.fetch()


@pytest.fixture(scope="module")
def entries(data: Path) -> dict[str, MultiTurnEntry]:
    return {e.id: e for e in load_multiturn(data_dir=data)}


def _specs(entry: MultiTurnEntry, data: Path, *, errata: bool = True) -> dict[str, dict[str, Any]]:
    instances = {
        c: instantiate(c, entry.initial_config, long_context=entry.long_context)
        for c in entry.involved_classes
    }
    docs = load_docs(data, entry.involved_classes)
    return {s["name"]: s for s in tool_specs(instances, docs, errata=errata)}


# ------------------------------------------------------------------ the whole suite


def test_all_800_ground_truths_replayed_as_plans_match_bfcl_state_and_replay_on_reexecution(
    data: Path,
) -> None:
    report = run_multiturn(data_dir=data).to_dict()

    assert report["entries"] == 800
    assert report["by_category"] == {c: {"entries": 200, "passed": 200} for c in MULTI_TURN_CATEGORIES}
    assert report["passed"] == 800, report["failures"][:3]
    assert report["reexecution_state_unchanged"] == 800
    assert report["reexecuted_writes"] == report["replayed_writes"] > 2000
    assert report["node_errors"] == {}
    assert report["nodes"] == 4625  # every ground-truth call string of the four categories
    assert 0 < report["conflict_edges"] < report["nodes"]
    assert report["concurrent_nodes"] > 0
    assert report["max_parallel"] > 1


# ------------------------------------------------------------------ call strings


def test_keyword_call_strings_are_read_as_literals() -> None:
    call = parse_call("lockDoors(unlock=False, door=['driver', 'passenger'])")

    assert call.name == "lockDoors"
    assert call.arguments == {"unlock": False, "door": ["driver", "passenger"]}


def test_positional_arguments_are_named_from_the_method_signature() -> None:
    def sort(file_name: str, reverse: bool = False) -> None: ...

    call = parse_call("sort('final_report.pdf')", {"sort": inspect.signature(sort)})

    assert call.arguments == {"file_name": "final_report.pdf"}


def test_negative_numbers_and_nested_dicts_are_literals() -> None:
    call = parse_call("f(a=-1.5, b={'k': [1, None]})")

    assert call.arguments == {"a": -1.5, "b": {"k": [1, None]}}


@pytest.mark.parametrize(
    "text",
    [
        "cd(folder=name)",
        "os.system('ls')",
        "cd(folder='a')()",
        "cd(**{'folder': 'a'})",
        "cd(folder=__import__('os').getcwd())",
        "cd(folder='a'",
        "cd('a')",
    ],
)
def test_anything_but_one_call_with_literal_arguments_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_call(text)


def test_every_ground_truth_call_parses_to_a_known_tool(
    entries: Mapping[str, MultiTurnEntry], data: Path
) -> None:
    for entry in entries.values():
        instances = {
            c: instantiate(c, entry.initial_config, long_context=False) for c in entry.involved_classes
        }
        sigs = signatures(instances)
        for turn in entry.ground_truth:
            for text in turn:
                assert parse_call(text, sigs).name in sigs, (entry.id, text)


# ------------------------------------------------------------------ tools and their sets


def test_file_system_tools_read_or_write_the_whole_tree(
    entries: Mapping[str, MultiTurnEntry], data: Path
) -> None:
    specs = _specs(entries["multi_turn_base_0"], data)

    assert (specs["ls"]["effect"], specs["ls"]["reads"], specs["ls"]["writes"]) == ("read", ("fs:",), ())
    assert (specs["cd"]["effect"], specs["cd"]["writes"]) == ("write", ("fs:",))
    assert specs["mkdir"]["input_schema"]["required"] == ["dir_name"]
    assert specs["mkdir"]["input_schema"]["additionalProperties"] is False


def test_math_is_pure_and_constant_lookups_declare_no_resource(
    entries: Mapping[str, MultiTurnEntry], data: Path
) -> None:
    math_entry = next(e for e in entries.values() if "MathAPI" in e.involved_classes)
    travel_entry = next(e for e in entries.values() if "TravelAPI" in e.involved_classes)

    add = _specs(math_entry, data)["add"]
    travel = _specs(travel_entry, data)

    assert (add["effect"], add["reads"], add["writes"]) == ("none", (), ())
    assert add["input_schema"]["properties"]["a"]["type"] == "number"
    assert (travel["list_all_airports"]["reads"], travel["list_all_airports"]["writes"]) == ((), ())
    assert travel["get_flight_cost"]["writes"] == ("travel:",)  # fills the cache book_flight reads


def test_the_close_ticket_erratum_is_what_admits_bfcl_string_ticket_ids(
    entries: Mapping[str, MultiTurnEntry], data: Path
) -> None:
    entry = entries["multi_turn_base_173"]
    literal = jsonschema_rs.validator_for(_specs(entry, data, errata=False)["close_ticket"]["input_schema"])
    widened = jsonschema_rs.validator_for(_specs(entry, data)["close_ticket"]["input_schema"])

    assert not literal.is_valid({"ticket_id": "ticket_001"})
    assert widened.is_valid({"ticket_id": "ticket_001"})
    assert widened.is_valid({"ticket_id": 7})


def _fingerprint(instance: Any) -> dict[str, Any]:
    """Everything an instance holds, hidden attributes and random generator state included."""
    return {
        k: v.getstate() if isinstance(v, random.Random) else copy.deepcopy(v)
        for k, v in vars(instance).items()
    }


def test_no_call_declared_read_or_pure_changes_any_state_in_the_ground_truth(
    entries: Mapping[str, MultiTurnEntry],
) -> None:
    checked = 0
    for entry in entries.values():
        instances = {
            c: instantiate(c, entry.initial_config, long_context=entry.long_context)
            for c in entry.involved_classes
        }
        owner = {name: c for c, i in instances.items() for name in public_methods(i)}
        sigs = signatures(instances)
        for turn in entry.ground_truth:
            for text in turn:
                call = parse_call(text, sigs)
                instance = instances[owner[call.name]]
                declared_write = call.name in BACKENDS[owner[call.name]].writes
                before = None if declared_write else _fingerprint(instance)
                getattr(instance, call.name)(**call.arguments)
                if before is not None:
                    assert _fingerprint(instance) == before, (entry.id, text)
                    checked += 1
    assert checked > 1000


# ------------------------------------------------------------------ the check itself


def test_a_dropped_ground_truth_call_fails_bfcls_state_check(
    entries: Mapping[str, MultiTurnEntry], data: Path
) -> None:
    entry = entries["multi_turn_base_0"]  # turn 0: cd document, mkdir temp, mv final_report.pdf temp

    outcome = asyncio.run(
        replay_entry(entry, data_dir=data, drop=lambda turn, index: (turn, index) == (0, 1))
    )

    assert not outcome.passed
    assert outcome.failed_turn == 0
    assert "root" in outcome.differences


def test_an_untouched_entry_passes_and_every_write_replays(
    entries: Mapping[str, MultiTurnEntry], data: Path
) -> None:
    outcome = asyncio.run(replay_entry(entries["multi_turn_base_90"], data_dir=data))

    assert outcome.passed
    assert outcome.reexecuted == outcome.replayed == 6  # five in turn 0 and 2, one mention
    assert outcome.concurrent_nodes > 0
