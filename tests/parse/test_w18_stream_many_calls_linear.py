"""A raw text stream of many calls is read in time linear in its length.

A server streams a model's text token by token, and the token that closes a call (``</tool_call>``,
``<|call|>``, ``<|tool_call_end|>``…) comes as a delta of its own. Past 8 KiB a stream re-reads its
text only once it grew by an eighth, except at such a delta, where it re-read the whole text at
once so as to report the call: a stream of ``k`` calls cost ``k`` re-reads of the text, quadratic
in its length (100,000 characters of small gpt-oss calls, streamed in 64-character deltas, took
1.9 s of CPU against 0.25 s for the same length of Hermes calls). Such re-reads now cost at most
:data:`~actionspace.parse._stream.SEAL_BUDGET` times the text; a stream of a few calls still
reports each at the delta that closes it.

Counted, not timed: the characters ``parse`` is handed while the stream is fed.
"""

from __future__ import annotations

import sys

import pytest

from actionspace.parse import StreamParser, parse

SEALED_RE_READS = 16
"""``actionspace.parse._stream.SEAL_BUDGET``, written out so that this test runs against any version."""

CALLS = {
    "hermes": ('<tool_call>{"name": "f", "arguments": {"a": 1}}', "</tool_call>"),
    "harmony": ("<|start|>assistant to=functions.f<|channel|>commentary json<|message|>{}", "<|call|>"),
    "kimi_k2": ("<|tool_call_begin|>functions.f:#<|tool_call_argument_begin|>{}", "<|tool_call_end|>"),
    "qwen3_coder": (
        "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>\n",
        "</tool_call>",
    ),
}


class Counting:
    """``parse`` that counts the characters it is handed."""

    def __init__(self) -> None:
        self.chars = 0
        self._parse = parse

    def __call__(self, raw: object, tools: object = None) -> object:
        if isinstance(raw, str):
            self.chars += len(raw)
        return self._parse(raw, tools)  # type: ignore[arg-type]


def _token_stream(body: str, seal: str, calls: int) -> list[str]:
    """Each call as a body delta then its closing token as a delta of its own, as tokens arrive
    (``#`` in the body is the call's number: Kimi K2 ids must differ)."""
    deltas: list[str] = []
    for i in range(calls):
        deltas += [body.replace("#", str(i)), seal]
    return deltas


@pytest.mark.parametrize("family", sorted(CALLS))
def test_a_stream_of_thousands_of_calls_re_reads_a_bounded_multiple_of_its_text(
    family: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    body, seal = CALLS[family]
    deltas = _token_stream(body, seal, 2_000)
    if family == "kimi_k2":
        deltas = ["<|tool_calls_section_begin|>", *deltas, "<|tool_calls_section_end|>"]
    counting = Counting()
    monkeypatch.setattr(sys.modules["actionspace.parse"], "parse", counting)
    stream = StreamParser(in_reasoning=False)
    shown = [call for delta in deltas for call in stream.feed(delta)]
    result = stream.finish()
    text = "".join(deltas)
    assert result.error is None and len(result.calls) == 2_000
    assert shown == list(result.calls[: len(shown)])
    # eager re-reads below 8 KiB, an eighth's growth (a geometric series: 9x), the sealed budget,
    # finish: far below the 2,000 re-reads of half the text on average (1,000x) it cost before
    assert counting.chars <= (SEALED_RE_READS + 12) * len(text) + 8192 * 400, (counting.chars, len(text))


@pytest.mark.parametrize("family", sorted(CALLS))
def test_a_call_after_long_text_is_reported_at_the_delta_that_closes_it(family: str) -> None:
    body, seal = CALLS[family]
    prose = "Working through the plan; " * 1_500  # 39,000 characters of text before any call
    opener = "<|tool_calls_section_begin|>" if family == "kimi_k2" else ""
    stream = StreamParser(in_reasoning=False)
    for at in range(0, len(prose), 7):
        assert stream.feed(prose[at : at + 7]) == []
    assert stream.feed(opener + body.replace("#", "0")) == []
    shown = stream.feed(seal)
    assert [call.name for call in shown] == ["f"]
    assert stream.finish().calls == tuple(shown)
