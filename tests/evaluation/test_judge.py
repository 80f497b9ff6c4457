"""Judging a turn against BFCL-style possible answers."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from actionspace.evaluation.judge import acceptable, answer_found, judge_turn

PLAY = [
    {"spotify.play": {"artist": ["Taylor Swift"], "duration": [20]}},
    {"spotify.play": {"artist": ["Maroon 5"], "duration": [15]}},
]


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def test_parallel_calls_pass_in_any_order() -> None:
    calls = [
        _call("spotify.play", artist="maroon 5", duration=15),
        _call("spotify.play", artist="Taylor Swift", duration=20.0),
    ]
    verdict = judge_turn(calls, PLAY)
    assert verdict.select_ok and verdict.args_ok
    assert verdict.pairs == (("spotify.play", "spotify.play"), ("spotify.play", "spotify.play"))


def test_a_wrong_value_fails_args_but_not_select() -> None:
    calls = [
        _call("spotify.play", artist="Adele", duration=15),
        _call("spotify.play", artist="Taylor Swift", duration=20),
    ]
    verdict = judge_turn(calls, PLAY)
    assert verdict.select_ok and not verdict.args_ok
    assert "Adele" in verdict.reason


def test_a_dropped_call_fails_select_and_names_what_is_missing() -> None:
    verdict = judge_turn([_call("spotify.play", artist="Taylor Swift", duration=20)], PLAY)
    assert not verdict.select_ok and verdict.reason == "missing ['spotify.play']"
    assert ("spotify.play", "<none>") in verdict.pairs


def test_optional_arguments_may_be_left_out_but_required_ones_not() -> None:
    expected = [{"area": {"base": [10], "unit": ["units", ""]}}]
    assert judge_turn([_call("area", base=10)], expected).args_ok
    assert judge_turn([_call("area", base=10, unit="Units")], expected).args_ok
    missing = judge_turn([_call("area", unit="units")], expected)
    assert not missing.args_ok and "missing argument 'base'" in missing.reason
    extra = judge_turn([_call("area", base=10, colour="red")], expected)
    assert not extra.args_ok and "unexpected argument" in extra.reason


def test_no_call_is_right_when_none_is_expected() -> None:
    assert judge_turn([], []).args_ok
    wrong = judge_turn([_call("area", base=1)], [])
    assert not wrong.select_ok and wrong.pairs == (("<none>", "area"),)


def test_booleans_are_not_numbers() -> None:
    assert not acceptable(True, [1])
    assert acceptable(True, [True])
    assert acceptable(5, [5.0])


@given(st.permutations(range(4)))
def test_any_order_of_a_fitting_parallel_turn_passes(order: list[int]) -> None:
    expected: list[Any] = [{"f": {"x": [i]}} for i in range(4)]
    calls = [_call("f", x=i) for i in order]
    assert judge_turn(calls, expected).args_ok


def test_object_answers_with_nested_option_lists_accept_any_listed_value() -> None:
    expected = [{"enroll": {"student": [{"department": ["Science", "science dept"], "year": [2, ""]}]}}]
    assert judge_turn([_call("enroll", student={"department": "Science"})], expected).args_ok
    assert judge_turn([_call("enroll", student={"department": "science dept", "year": 2})], expected).args_ok
    assert not judge_turn([_call("enroll", student={"department": "Arts"})], expected).args_ok
    assert not judge_turn([_call("enroll", student={"year": 2})], expected).args_ok
    assert not judge_turn([_call("enroll", student={"department": "Science", "x": 1})], expected).args_ok


def test_the_first_acceptable_value_resolves_nested_options() -> None:
    from actionspace.evaluation.judge import first_acceptable

    assert first_acceptable(["", 3]) == 3
    assert first_acceptable([{"department": ["Science"], "year": [2, ""]}]) == {"department": "Science"}


def test_an_answer_is_found_as_whole_words_ignoring_case_and_punctuation() -> None:
    assert answer_found("It was on April 1, 2024 in Seattle.", ["april 1 2024"])
    assert not answer_found("It was on April 1,2024 in Seattle.", ["april 1 2024"])  # spaces count
    assert answer_found("The richest is ZHANG Yiming.", ["Zhang Yiming"])
    assert answer_found("thirty-five", ["35", "thirty five"]) is False  # "-" is removed, not spaced
    assert answer_found("I am 35.", ["35", "thirty five"])
    assert not answer_found("I am 350 years old.", ["35"])  # not a whole word
    assert not answer_found("No idea.", ["Michael"])
    assert not answer_found("anything", [""])
