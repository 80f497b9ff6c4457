"""Any prefix of a well-formed output, streamed in any pieces, shows only calls the whole output holds.

For every raw text format the parser reads, a cut of the output fed to :class:`StreamParser` at
random cut points never has ``feed`` report a call the whole output does not contain (in its
order), whether ``in_reasoning`` is not known or ``False`` (for an output whose prompt opened its
reasoning, not known); and ``finish()`` on the cut output never raises:
it keeps a prefix of the whole output's calls, and a fault is a ``parse_error``. Ended with
``end("length")``, the cut output keeps none of its calls.
"""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from actionspace.parse import StreamParser, parse
from tests.parse import samples
from tests.parse.test_w19_engine_formats import CASES

RAW = {
    name: text
    for name, text in samples.TEXT_SAMPLES.items()
    if not text.lstrip().startswith("{") and name not in ("plain",)
}
ORPHAN_REASONING = (  # a prompt that opened <think>: the drafted call is reasoning
    'Maybe <tool_call>{"name": "drop_db", "arguments": {}}</tool_call> or '
    '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>, but the first would '
    "lose data and the user only asked about the weather, so only the second.\n</think>\n\n"
    '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
)
OUTPUTS = {**RAW, **{name: case[0] for name, case in CASES.items()}, "orphan_reasoning": ORPHAN_REASONING}


def test_every_format_is_covered() -> None:
    formats = {parse(text).format for text in OUTPUTS.values()}
    assert {"seed_oss", "minimax_m2", "minimax", "jamba", "granite", "internlm", "phi4_mini"} <= formats
    assert {"hermes", "qwen3_xml", "harmony", "kimi_k2", "deepseek_dsml", "gemma4", "mistral"} <= formats


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(sorted(OUTPUTS)),
    st.floats(0, 1),
    st.lists(st.floats(0, 1), max_size=10),
    st.sampled_from([None, False]),
)
@example(name="orphan_reasoning", end=1.0, cuts=[0.6], in_reasoning=None)
def test_a_streamed_prefix_never_shows_a_call_the_whole_output_lacks(
    name: str, end: float, cuts: list[float], in_reasoning: bool | None
) -> None:
    assume(name != "orphan_reasoning" or in_reasoning is None)  # False says no block was opened
    text = OUTPUTS[name]
    whole = parse(text).calls
    prefix = text[: round(end * len(text))]
    points = sorted({0, len(prefix), *(round(c * len(prefix)) for c in cuts)})
    stream = StreamParser(in_reasoning=in_reasoning)
    shown = []
    for a, b in itertools.pairwise(points):
        shown += stream.feed(prefix[a:b])
        assert shown == list(whole[: len(shown)]), (name, prefix[:b])
    result = stream.finish()
    assert result == parse(prefix)
    if name != "orphan_reasoning":  # cut before its closer, the reasoning reads as an answer
        assert list(result.calls) == list(whole[: len(result.calls)])
    if result.error is not None:
        assert result.error.category == "parse_error" and result.error.details["reason"]
    stream.end("length")
    cut = stream.finish()
    assert cut.calls == ()
    if len(prefix) < len(text.rstrip()) and whole:
        assert cut.error is None or cut.error.category == "parse_error"
