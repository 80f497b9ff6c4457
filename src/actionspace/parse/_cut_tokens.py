"""An output that stops inside one of its format's tokens was cut there.

A model stopped mid-output (``…}}</tool_ca``, ``…{}<|tool_call_e``, ``…</｜DSML｜inv``,
``…get_weather[CAL``) wrote nothing wrong: what a format parser finds where the rest of the token
belongs is the token's head, so its fault (``unexpected_text``, ``missing_value``…) becomes
``truncated``, as for a cut anywhere else in the call. Text that is no token's head stays the
fault it was (``</tool_cell>`` is ``unexpected_text``).
"""

from __future__ import annotations

from actionspace.parse._deepseek import DEEPSEEK, DEEPSEEK_SEP, DSML_ASCII, DSML_FULLWIDTH
from actionspace.parse._gemma import FUNCTION_GEMMA, GEMMA4
from actionspace.parse._glm import ARG_KEY_CLOSE, ARG_KEY_OPEN, ARG_VALUE_CLOSE, ARG_VALUE_OPEN
from actionspace.parse._harmony import HARMONY_CHANNEL, HARMONY_CONSTRAIN, HARMONY_ENDS, HARMONY_MESSAGE
from actionspace.parse._json_marked import GRANITE_CALL, INTERNLM_ACTION, INTERNLM_END, TOOL_CALLS_CLOSE
from actionspace.parse._kimi import KIMI, KIMI_ARGUMENTS, KIMI_SINGULAR
from actionspace.parse._llama import PYTHON_END
from actionspace.parse._mistral import MISTRAL_ARGS, MISTRAL_CALL_ID, MISTRAL_CALLS
from actionspace.parse._qwen_xml import FUNCTION_CLOSE, FUNCTION_OPEN, PARAMETER_CLOSE, PARAMETER_OPEN
from actionspace.parse._result import Malformed
from actionspace.parse._tagged import TOOL_CALL_CLOSE, TOOL_CALL_OPEN
from actionspace.parse._xml_marked import INVOKE_CLOSE, INVOKE_OPEN, MINIMAX_M2_CLOSE, SEED_CLOSE

__all__ = ["CUT_REASONS", "cut_in_token"]

CUT_REASONS = frozenset(
    {
        "truncated",
        "unterminated_block",
        "unterminated_section",
        "unterminated_call",
        "unterminated_fence",
        "unterminated_reasoning",
        "cut_off",
    }
)
"""The reasons of a fault that says where an output stops, not what it holds wrong."""

_DSML = tuple(
    token
    for dsml in (DSML_FULLWIDTH, DSML_ASCII)
    for name in ("function_calls", "tool_calls", "invoke", "parameter")
    for token in (dsml.tag(name), dsml.end(name))
)
_TOKENS = (
    TOOL_CALL_OPEN,
    TOOL_CALL_CLOSE,
    FUNCTION_OPEN,
    FUNCTION_CLOSE,
    PARAMETER_OPEN,
    PARAMETER_CLOSE,
    ARG_KEY_OPEN,
    ARG_KEY_CLOSE,
    ARG_VALUE_OPEN,
    ARG_VALUE_CLOSE,
    *(
        token
        for m in (KIMI, KIMI_SINGULAR, DEEPSEEK)
        for token in (m.section_open, m.section_close, m.call_open, m.call_close)
    ),
    KIMI_ARGUMENTS,
    DEEPSEEK_SEP,
    *_DSML,
    MISTRAL_CALLS,
    MISTRAL_CALL_ID,
    MISTRAL_ARGS,
    HARMONY_CHANNEL,
    HARMONY_CONSTRAIN,
    HARMONY_MESSAGE,
    *HARMONY_ENDS,
    PYTHON_END,
    *(token for gemma in (GEMMA4, FUNCTION_GEMMA) for token in (gemma.open, gemma.close, gemma.delimiter)),
    SEED_CLOSE,
    MINIMAX_M2_CLOSE,
    INVOKE_OPEN,
    INVOKE_CLOSE,
    TOOL_CALLS_CLOSE,
    GRANITE_CALL,
    INTERNLM_ACTION,
    INTERNLM_END,
)
_LONGEST = max(map(len, _TOKENS))


def cut_in_token(text: str, fault: Malformed) -> Malformed:
    """``fault``, raised reading ``text``, as ``truncated`` when what stands at its position up to
    the end of ``text`` (past whitespace) is the head of a token of a format; else ``fault``."""
    if fault.reason in CUT_REASONS or fault.pos is None or fault.source is not None:
        return fault
    start = len(text) - len(rest := text[fault.pos :].lstrip())
    if not rest or len(rest) >= _LONGEST:
        return fault
    token = next((t for t in _TOKENS if len(t) > len(rest) and t.startswith(rest)), None)
    if token is None:
        return fault
    cut = Malformed(
        "truncated",
        f"the output stops inside {token!r} ({rest!r}): it was cut off; emit the call again, whole",
        pos=start,
        fmt=fault.fmt,
    )
    cut.details.update(fault.details)
    return cut
