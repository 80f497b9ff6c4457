"""An integer of more digits than Python converts, written by a model in a text format whose values
are typed by the tool's schema (Qwen3-Coder XML, GLM) or read as Python literals (pythonic lists):
the parse ends in a ``parse_error`` or a call whose value validation rejects, never in a parser
that raises (``StreamParser.finish`` raised ``ValueError``; ``parse`` reported a bug, ``internal``)
and never with the interpreter's advice (``sys.set_int_max_str_digits``) as the model's message."""

from __future__ import annotations

import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.parse import StreamParser, parse

LIMIT = sys.get_int_max_str_digits()
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "f",
            "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}},
        },
    }
]


def _qwen(value: str) -> str:
    return f"<tool_call>\n<function=f>\n<parameter=a>\n{value}\n</parameter>\n</function>\n</tool_call>"


def _glm(value: str) -> str:
    return f"<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>{value}</arg_value>\n</tool_call>"


@pytest.mark.parametrize("write", [_qwen, _glm], ids=["qwen3_xml", "glm45"])
@pytest.mark.parametrize("sign", ["", "-", "+"])
def test_a_schema_typed_integer_too_long_stays_text_for_validation(write: object, sign: str) -> None:
    assert callable(write)
    text = write(sign + "7" * (LIMIT + 1))
    result = parse(text, tools=TOOLS)
    assert result.error is None, result.error
    (call,) = result.calls
    assert call.arguments == {"a": sign + "7" * (LIMIT + 1)}  # not an integer: validation rejects it
    stream = StreamParser(tools=TOOLS)
    stream.feed(text)
    assert stream.finish().calls == result.calls


@pytest.mark.parametrize("write", [_qwen, _glm], ids=["qwen3_xml", "glm45"])
def test_a_cut_stream_holding_one_is_cut_off_not_an_exception(write: object) -> None:
    assert callable(write)
    stream = StreamParser(tools=TOOLS)
    stream.feed(write("7" * (LIMIT + 1)))
    stream.end("length")
    result = stream.finish()
    assert result.calls == ()
    assert result.error is not None and result.error.details["reason"] == "cut_off"
    whole = parse(stream.output(), tools=TOOLS)
    assert whole.error is not None and whole.error.details["reason"] == "cut_off"


def test_an_integer_within_the_limit_is_still_typed() -> None:
    result = parse(_qwen("7" * LIMIT), tools=TOOLS)
    assert result.error is None and result.calls[0].arguments == {"a": int("7" * LIMIT)}


@pytest.mark.parametrize("sign", ["", "-"])
def test_a_pythonic_integer_too_long_says_so(sign: str) -> None:
    result = parse(f"[f(a={sign}{'7' * (LIMIT + 1)})]")
    assert result.calls == ()
    error = result.error
    assert error is not None and error.category == "parse_error"
    assert error.details["reason"] == "invalid_number"
    assert f"more than {LIMIT} digits" in error.message
    assert "sys.set_int_max_str_digits" not in error.message


@settings(max_examples=30, deadline=None)
@given(extra=st.integers(1, 3000), write=st.sampled_from([_qwen, _glm]), pad=st.sampled_from(["", " ", "\n"]))
def test_no_long_integer_makes_a_text_parser_raise(extra: int, write: object, pad: str) -> None:
    assert callable(write)
    text = write(pad + "9" * (LIMIT + extra) + pad)
    for cut in (None, "length"):
        stream = StreamParser(tools=TOOLS)
        stream.feed(text)
        stream.end(cut)
        result = stream.finish()  # never raises
        assert result.error is None or result.error.category == "parse_error"
        assert result.error is None or result.error.details["reason"] != "internal"
