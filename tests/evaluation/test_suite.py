from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest

from actionspace.demo.calendar import CalendarService
from actionspace.demo.scenario import USER, seed_calendar
from actionspace.evaluation import _bfcl_data
from actionspace.evaluation._suite_bfcl import BFCL_CATEGORIES, CATEGORY_MAP
from actionspace.evaluation.outcomes import CATEGORIES
from actionspace.evaluation.suite import (
    FORMAT_VERSION,
    ExpectedCall,
    Suite,
    SuiteError,
    Task,
    bfcl_suite,
    demo_suite,
    get_predicate,
    load,
    register_predicate,
)

ROOT = Path(__file__).resolve().parents[2]


def _tool(name: str) -> dict[str, Any]:
    return {"name": name, "description": "", "parameters": {"type": "object", "properties": {}}}


def _small_suite() -> Suite:
    lookup = ExpectedCall(name="lookup", arguments={"q": ["cats", "Cats"], "limit": [10, ""]})
    return Suite(
        name="small",
        version="3",
        source="hand-written",
        tasks=(
            Task(id="a", request="find cats", tools=(_tool("lookup"),), expected=((lookup,),)),
            Task(
                id="b",
                category="info_missing",
                request=(({"role": "user", "content": "find"},), ({"role": "user", "content": "cats"},)),
                tools=(_tool("lookup"), _tool("later")),
                held_back={1: ("later",)},
                expected=((), (lookup,)),
                initial_state={"index": {"cats": [1, 2]}},
                scopes=("read:*",),
                predicate="small.found",
                notes=("a repair",),
            ),
            Task(id="c", category="no_tool", request="hi", no_call=True, expected=((),)),
        ),
    )


def test_a_suite_survives_a_json_round_trip_unchanged(tmp_path: Path) -> None:
    suite = _small_suite()
    assert Suite.from_json(suite.to_json()) == suite
    assert load(suite.save(tmp_path / "small.json")) == suite
    assert json.loads(suite.to_json())["format_version"] == FORMAT_VERSION


def test_a_task_reports_its_turns_offered_tools_and_negative_turns() -> None:
    task = _small_suite().task("b")
    assert task.turns == 2
    assert [t["name"] for t in task.offered(0)] == ["lookup"]
    assert [t["name"] for t in task.offered(1)] == ["lookup", "later"]
    assert task.negative_turns() == (0,)
    assert task.possible_answers(1) == [{"lookup": {"q": ["cats", "Cats"], "limit": [10, ""]}}]
    assert task.messages(1) == ({"role": "user", "content": "cats"},)
    assert _small_suite().task("a").messages(0) == ({"role": "user", "content": "find cats"},)


def test_a_file_of_a_newer_format_version_is_refused() -> None:
    data = _small_suite().to_dict() | {"format_version": FORMAT_VERSION + 1}
    with pytest.raises(SuiteError, match="not readable"):
        Suite.from_dict(data)
    with pytest.raises(SuiteError, match="not an actionspace suite"):
        Suite.from_json('{"tasks": []}')
    with pytest.raises(SuiteError, match="must be JSON"):
        Suite.from_json("{")


def test_malformed_tasks_are_refused() -> None:
    with pytest.raises(SuiteError, match="unknown category"):
        Task(id="x", request="r", category="sometimes")  # type: ignore[arg-type]
    with pytest.raises(SuiteError, match="cannot expect calls"):
        Task(id="x", request="r", no_call=True, expected=((ExpectedCall(name="f"),),))
    with pytest.raises(SuiteError, match="not among the tools"):
        Task(id="x", request="r", held_back={1: ("ghost",)})
    with pytest.raises(SuiteError, match="2 turns but 1 expected"):
        Task(id="x", request=((), ()), expected=((),))
    with pytest.raises(SuiteError, match="appears twice"):
        Suite(name="s", tasks=(Task(id="x", request="r"), Task(id="x", request="r")))
    with pytest.raises(SuiteError, match="must be a list"):
        ExpectedCall(name="f", arguments={"a": "not a list"})


def test_a_predicate_is_found_by_its_registered_name() -> None:
    @register_predicate("tests.suite.always")
    def always(task: Task, final_state: Any) -> bool:
        return True

    assert get_predicate("tests.suite.always") is always
    with pytest.raises(SuiteError, match="already registered"):
        register_predicate("tests.suite.always")(lambda task, state: False)
    with pytest.raises(SuiteError, match="no predicate"):
        get_predicate("tests.suite.missing")


def test_the_demo_suite_holds_the_calendar_task_with_its_expected_call() -> None:
    suite = demo_suite()
    assert Suite.from_json(suite.to_json()) == suite
    task = suite.task("demo_calendar_review")
    assert task.request == "next Tuesday 3 pm, one hour review with the design team"
    assert [t["name"] for t in task.tools] == [
        "get_user_profile",
        "list_team_members",
        "create_event",
        "notify_attendees",
        "get_event",
    ]
    (create,) = task.expected[0]
    assert create.arguments["start"] == ("2026-01-13T15:30:00+08:00", "2026-01-13T07:30:00Z")
    assert create.arguments["attendees"][0] == ["u-chen", "u-wang", "u-zhao"]
    assert {t.category for t in suite} == {"normal", "info_missing", "no_tool"}


def test_the_calendar_predicate_accepts_the_expected_booking_only(tmp_path: Path) -> None:
    task = demo_suite().task("demo_calendar_review")
    predicate = get_predicate(task.predicate or "")
    service = CalendarService(tmp_path / "calendar.db")
    try:
        seed_calendar(service, datetime.fromisoformat("2026-01-13").date())
        assert not predicate(task, service)
        (create,) = task.expected[0]
        start, end = (CalendarService.parse_ts(str(create.arguments[k][0])) for k in ("start", "end"))
        team = ["u-chen", "u-wang", "u-zhao"]
        service.create_event(owner=USER, title="x", start=start, end=end, timezone="UTC", attendees=team)
        assert predicate(task, service)
        service.create_event(owner=USER, title="y", start=start, end=end, timezone="UTC", attendees=["u-vp"])
        assert predicate(task, service)  # the VP's event does not hold the team
        service.create_event(owner=USER, title="z", start=start, end=end, timezone="UTC", attendees=team)
        assert not predicate(task, service)  # a duplicate booking
        assert not predicate(task, object())
    finally:
        service.close()


@pytest.fixture(scope="module")
def bfcl() -> Suite:
    return bfcl_suite()


def _records(name: str) -> list[dict[str, Any]]:
    path = _bfcl_data.fetch() / name
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.slow
@pytest.mark.parametrize("category", BFCL_CATEGORIES)
def test_every_bfcl_record_becomes_one_task_with_its_ground_truth(bfcl: Suite, category: str) -> None:
    records = _records(f"BFCL_v4_{category}.json")
    tasks = [t for t in bfcl if t.origin == f"bfcl:{category}"]
    assert [t.id for t in tasks] == [r["id"] for r in records]
    assert {t.category for t in tasks} == {CATEGORY_MAP[category]}
    answers = {}
    if (_bfcl_data.fetch() / "possible_answer" / f"BFCL_v4_{category}.json").is_file():
        answers = {a["id"]: a["ground_truth"] for a in _records(f"possible_answer/BFCL_v4_{category}.json")}
    for task, record in zip(tasks, records, strict=True):
        if not category.startswith("multi_turn") and category not in ("memory", "web_search"):
            assert [t["name"] for t in task.tools] == [f["name"] for f in record["function"]]
        assert task.turns == len(record["question"])
        truth = answers.get(task.id)
        if category in ("memory", "web_search"):
            assert truth is not None and task.answers == tuple(truth) and task.answers
            assert task.tools and not task.expected and not task.no_call
        elif category.startswith("multi_turn"):
            assert truth is not None
            assert [len(turn) for turn in task.expected] == [len(turn) for turn in truth]
        elif truth is not None:
            assert task.possible_answers(0) == truth
        elif "irrelevance" in category:
            assert task.no_call and task.negative_turns() == (0,)
        else:
            assert not task.has_ground_truth  # live_relevance ships none


@pytest.mark.slow
def test_bfcl_tool_parameters_are_valid_json_schema(bfcl: Suite) -> None:
    for task in bfcl:
        for tool in task.tools:
            jsonschema_rs.Draft202012Validator(tool["parameters"])


@pytest.mark.slow
def test_bfcl_multi_turn_ground_truth_is_read_call_by_call(bfcl: Suite) -> None:
    base = bfcl.task("multi_turn_base_0")
    assert [c.name for c in base.expected[0]] == ["cd", "mkdir", "mv"]
    assert base.expected[0][2].arguments == {"source": ("final_report.pdf",), "destination": ("temp",)}
    assert base.expected[2][0].arguments == {"file_name": ("final_report.pdf",)}  # positional
    assert set(base.initial_state["involved_classes"]) == {"GorillaFileSystem", "TwitterAPI"}
    assert base.initial_state["long_context"] is False
    missing = bfcl.task("multi_turn_miss_func_0")
    assert missing.held_back == {3: ("sort",)}
    assert missing.negative_turns() == (2,)
    assert "sort" not in [t["name"] for t in missing.offered(2)]
    assert "sort" in [t["name"] for t in missing.offered(3)]
    for task, record in zip(
        [t for t in bfcl if t.origin == "bfcl:multi_turn_base"],
        _records("BFCL_v4_multi_turn_base.json"),
        strict=True,
    ):
        offered = {t["name"] for t in task.tools}
        assert offered.isdisjoint(record.get("excluded_function") or ())


@pytest.mark.slow
def test_the_bfcl_suite_survives_a_json_round_trip(bfcl: Suite) -> None:
    assert Suite.from_json(bfcl.to_json()) == bfcl
    assert set(CATEGORY_MAP.values()) <= set(CATEGORIES)


def test_an_unknown_bfcl_category_is_refused() -> None:
    with pytest.raises(SuiteError, match="unknown BFCL categories"):
        bfcl_suite(["format_sensitivity"])


def test_the_documented_example_runs() -> None:
    text = (ROOT / "docs" / "evaluation-suites.md").read_text(encoding="utf-8")
    blocks = text.split("```python\n")[1:]
    assert len(blocks) == 2
    namespace: dict[str, Any] = {}
    for block in blocks:
        exec(compile(block.split("```")[0], "evaluation-suites.md", "exec"), namespace)
    assert namespace["demo"].name == "demo"
