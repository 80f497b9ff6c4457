"""Ablations change exactly one interface factor, and the ground truth follows renames."""

from __future__ import annotations

from typing import Any

from actionspace.evaluation.ablations import ABLATIONS, counterfactual, feedback
from actionspace.evaluation.judge import judge_turn

TOOLS: list[dict[str, Any]] = [
    {
        "name": "weather.get_forecast",
        "description": "Forecast for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name."},
                "unit": {"type": "string", "enum": ["C", "F"]},
            },
            "required": ["city"],
        },
    },
    {
        "name": "calendar_add",
        "description": "Add an event.",
        "parameters": {"type": "object", "properties": {}},
    },
]
TURN: list[dict[str, Any]] = [{"weather.get_forecast": {"city": ["Paris"], "unit": ["C", ""]}}]


def test_hiding_names_renames_tools_and_ground_truth_alike() -> None:
    ablation = ABLATIONS["names_hidden"]
    shown = ablation.tools(TOOLS, 7)
    names = {t["name"] for t in shown}
    assert names == {"tool_01", "tool_02"}
    [expected] = ablation.expected([TURN], TOOLS, 7)
    new_name = next(iter(expected[0]))
    assert new_name in names
    assert judge_turn([{"name": new_name, "arguments": {"city": "Paris"}}], expected).args_ok
    assert [t["parameters"] for t in shown if t["name"] == new_name] == [TOOLS[0]["parameters"]]


def test_dropping_enums_touches_nothing_else() -> None:
    shown = ABLATIONS["enums_dropped"].tools(TOOLS, 0)
    unit = shown[0]["parameters"]["properties"]["unit"]
    assert "enum" not in unit and unit["type"] == "string"
    assert shown[0]["description"] == TOOLS[0]["description"]
    assert "enum" in TOOLS[0]["parameters"]["properties"]["unit"]  # the original is untouched


def test_perturbed_descriptions_keep_names_and_schemas() -> None:
    shown = ABLATIONS["descriptions_perturbed"].tools(TOOLS, 0)
    assert [t["name"] for t in shown] == [t["name"] for t in TOOLS]
    assert all("Forecast" not in t["description"] for t in shown)
    assert shown[0]["parameters"]["required"] == ["city"]


def test_widening_adds_confusable_decoys_but_keeps_every_original() -> None:
    shown = ABLATIONS["candidates_widened"].tools(TOOLS, 3)
    names = [t["name"] for t in shown]
    assert {"weather.get_forecast", "calendar_add"} <= set(names)
    assert len(names) > len(TOOLS) and len(names) == len(set(names))
    assert "weather.get_forecast_v2" in names


def test_bare_feedback_hides_the_error_details() -> None:
    error = {
        "status": "error",
        "error": {"category": "invalid_arguments", "field_errors": [{"path": "/city"}]},
    }
    assert feedback(error, bare=True) == "error"
    assert "invalid_arguments" in feedback(error)


def test_a_counterfactual_changes_one_fact_and_the_argument_must_follow() -> None:
    cf = counterfactual("What is the forecast for Paris this weekend?", TURN)
    assert cf is not None and cf.argument == "city" and cf.original == "Paris"
    assert "Paris" not in cf.request and str(cf.changed) in cf.request
    numbers = counterfactual("Play 20 minutes of music", [{"play": {"minutes": [20]}}], seed=1)
    assert numbers is not None and numbers.changed != 20 and str(numbers.changed) in numbers.request
    assert counterfactual("no facts here", [{"f": {"x": [1, 2]}}]) is None
