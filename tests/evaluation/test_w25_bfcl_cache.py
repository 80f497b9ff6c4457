"""The BFCL readers on a cache they cannot trust: missing, partly deleted, hand-edited, not UTF-8.

No test here reaches the network: a missing wheel is "downloaded" by a stand-in that fails as an
offline ``pip download`` does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from actionspace.cli import _mount, app
from actionspace.errors import BfclDataError
from actionspace.evaluation import _bfcl_data
from actionspace.evaluation._suite_bfcl import load_bfcl_suite

runner = CliRunner(env={"COLUMNS": "200", "TERM": "dumb"})

_GOOD_QUESTION = {
    "id": "simple_python_0",
    "question": [[{"role": "user", "content": "Area of a triangle, base 10, height 5."}]],
    "function": [
        {
            "name": "area",
            "description": "Triangle area.",
            "parameters": {
                "type": "dict",
                "properties": {"base": {"type": "integer"}, "height": {"type": "integer"}},
                "required": ["base", "height"],
            },
        }
    ],
}
_GOOD_ANSWER = {"id": "simple_python_0", "ground_truth": [{"area": {"base": [10], "height": [5]}}]}


def _data(tmp_path: Path, questions: list[Any], answers: list[Any]) -> Path:
    data = tmp_path / "data"
    (data / "possible_answer").mkdir(parents=True)
    name = "BFCL_v4_simple_python.json"
    (data / name).write_text("".join(json.dumps(q) + "\n" for q in questions), encoding="utf-8")
    (data / "possible_answer" / name).write_text(
        "".join(json.dumps(a) + "\n" for a in answers), encoding="utf-8"
    )
    return data


def test_a_well_formed_data_folder_loads(tmp_path: Path) -> None:
    data = _data(tmp_path, [_GOOD_QUESTION], [_GOOD_ANSWER])
    assert [e.id for e in _bfcl_data.load("simple_python", data)] == ["simple_python_0"]
    assert [t.id for t in load_bfcl_suite(["simple_python"], data_dir=data).tasks] == ["simple_python_0"]


MALFORMED: dict[str, tuple[list[Any], list[Any]]] = {
    "a question line is a list": ([[1, 2]], [_GOOD_ANSWER]),
    "an answer line is a number": ([_GOOD_QUESTION], [7]),
    "a question has no id": ([{k: v for k, v in _GOOD_QUESTION.items() if k != "id"}], [_GOOD_ANSWER]),
    "an answer has no ground truth": ([_GOOD_QUESTION], [{"id": "simple_python_0"}]),
    "a question has no functions": (
        [{k: v for k, v in _GOOD_QUESTION.items() if k != "function"}],
        [_GOOD_ANSWER],
    ),
    "a function doc has no name": ([{**_GOOD_QUESTION, "function": [{"description": "x"}]}], [_GOOD_ANSWER]),
    "an id is a list": ([{**_GOOD_QUESTION, "id": ["x"]}], [{**_GOOD_ANSWER, "id": ["x"]}]),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_hand_edited_data_file_is_a_bfcl_data_error(tmp_path: Path, case: str) -> None:
    questions, answers = MALFORMED[case]
    data = _data(tmp_path, questions, answers)
    with pytest.raises(BfclDataError):
        _bfcl_data.load("simple_python", data)
    with pytest.raises(BfclDataError):
        load_bfcl_suite(["simple_python"], data_dir=data)


def test_a_data_file_that_is_not_utf8_is_a_bfcl_data_error(tmp_path: Path) -> None:
    data = _data(tmp_path, [_GOOD_QUESTION], [_GOOD_ANSWER])
    (data / "BFCL_v4_simple_python.json").write_bytes(b'{"id": "\xff\xfe"}\n')
    with pytest.raises(BfclDataError, match="BFCL_v4_simple_python"):
        _bfcl_data.load("simple_python", data)


def test_a_truncated_wheel_in_the_cache_is_refused_by_its_digest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_bfcl_data, "_download", _must_not_download)
    (tmp_path / _bfcl_data.WHEEL).write_bytes(b"PK\x03\x04 half a wheel")
    with pytest.raises(BfclDataError, match="sha256"):
        _bfcl_data.fetch(tmp_path)
    assert not (tmp_path / f"bfcl_eval-{_bfcl_data.BFCL_VERSION}").exists()


def _must_not_download(cache: Path) -> None:
    raise AssertionError("a download was attempted")


def test_a_folder_where_the_wheel_should_be_is_a_bfcl_data_error_not_a_download(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_bfcl_data, "_download", _must_not_download)
    (tmp_path / _bfcl_data.WHEEL).mkdir()
    with pytest.raises(BfclDataError, match="not a file"):
        _bfcl_data.fetch(tmp_path)


def _offline(cache: Path) -> None:
    raise BfclDataError(f"could not download {_bfcl_data.WHEEL}: ERROR: No matching distribution found")


@pytest.mark.parametrize("args", [["eval", "bfcl"], ["eval", "bfcl", "--stage", "validator"]])
def test_eval_bfcl_without_a_cache_while_offline_is_one_error_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    monkeypatch.setenv("ACTIONSPACE_CACHE", str(tmp_path))
    monkeypatch.setattr(_bfcl_data, "_download", _offline)
    _mount()
    result = runner.invoke(app, args)
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    said = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(said) == 1 and said[0].startswith("error: "), result.stderr
    assert "could not download" in said[0]
