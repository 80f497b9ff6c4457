"""Raw model text: reasoning blocks split off, then the one call format the text uses, found by its
markers; bare JSON, JSON or ``tool_code`` fences and pythonic call lists when there are none."""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections.abc import Callable
from typing import Any

from actionspace.parse._cut_tokens import cut_in_token
from actionspace.parse._deepseek import DEEPSEEK, DSML_MARKERS, parse_deepseek, parse_dsml
from actionspace.parse._gemma import (
    FUNCTION_GEMMA,
    GEMMA4,
    parse_function_gemma,
    parse_gemma4,
    parse_gemma4_after_thought,
)
from actionspace.parse._harmony import HARMONY_CHANNEL, HARMONY_ENDS, HARMONY_START, parse_harmony
from actionspace.parse._heads import CALL_KEYS, JSON_FENCES, callish_value, is_call_head
from actionspace.parse._json_marked import (
    GRANITE_CALL,
    INTERNLM_ACTION,
    INTERNLM_INTERPRETER,
    PHI4_CALLS,
    TOOL_CALLS_OPEN,
    parse_granite,
    parse_internlm,
    parse_phi4,
    parse_tool_calls_block,
)
from actionspace.parse._kimi import KIMI, KIMI_SINGULAR, parse_kimi
from actionspace.parse._llama import PYTHON_START, PYTHON_TAG, parse_llama4, parse_llama_python_tag
from actionspace.parse._mistral import MISTRAL_CALLS, parse_mistral
from actionspace.parse._pythonic import parse_call_list, parse_statements
from actionspace.parse._qwen_xml import FUNCTION_OPEN, parse_function_blocks
from actionspace.parse._result import Collector, Malformed
from actionspace.parse._scan import Finder, decode_json_at, iter_json_values, skip_ws, snippet
from actionspace.parse._structured import classify, feed
from actionspace.parse._tagged import TOOL_CALL_OPEN, parse_tool_call_tags
from actionspace.parse._xml_marked import MINIMAX_M2_OPEN, SEED_OPEN, parse_minimax_m2, parse_seed_oss

__all__ = [
    "REASONING_CLOSERS",
    "REASONING_MARKS",
    "begun_call",
    "parse_text",
    "parse_text_or_bytes",
    "prompt_opened",
    "visible_text",
]

_BOM = "\ufeff"
# Gemma 4 thinks in ``<|channel>thought\n…<channel|>``: the word ``thought`` names the channel.
GEMMA4_CHANNEL = "<|channel>"
_REASONING_TAGS = (
    ("<think>", "</think>"),
    ("<thinking>", "</thinking>"),
    ("[THINK]", "[/THINK]"),
    (GEMMA4_CHANNEL, "<channel|>"),
    ("<seed:think>", "</seed:think>"),
)
REASONING_CLOSERS = tuple(closer for _, closer in _REASONING_TAGS)
REASONING_MARKS = tuple(tag for pair in _REASONING_TAGS for tag in pair)
_TERMINATORS = (
    "<|im_end|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|eot|>",
    "<|eom|>",
    "<｜end▁of▁sentence｜>",
    "<|end|>",
    "<|call|>",
    "<|return|>",
    "<|endoftext|>",
    "<end_of_turn>",
    "<turn|>",
    "<|tool_response>",
    "</s>",
    "<seed:eos>",
)
_PYTHONIC_START = re.compile(r"\[\s*[A-Za-z_][\w.]*\s*\(")
_NEAR_PYTHONIC = re.compile(r"\[\s*([^\s\[\](){}\"',=]{1,128})\s*\(")
_ASCII_NAME = re.compile(r"[A-Za-z_][\w.]*", re.ASCII)
_CALLISH = re.compile(r'\[?\s*\{\s*"(?:' + "|".join(CALL_KEYS) + r')"\s*:')
_FENCE_OPEN = re.compile(r"```([\w-]*)[^\S\n]*\n")

TextParser = Callable[[str, Collector], None]

# The earliest marker present decides the format of the whole output (table order breaks ties).
_MARKED: tuple[tuple[tuple[str, ...], str, TextParser], ...] = (
    ((HARMONY_CHANNEL, HARMONY_START), "harmony", parse_harmony),
    ((KIMI.section_open, KIMI_SINGULAR.section_open, KIMI.call_open), "kimi_k2", parse_kimi),
    (DSML_MARKERS, "deepseek_dsml", parse_dsml),
    ((DEEPSEEK.section_open, DEEPSEEK.call_open), "deepseek", parse_deepseek),
    ((MISTRAL_CALLS,), "mistral", parse_mistral),
    ((GEMMA4.open,), "gemma4", parse_gemma4),
    ((FUNCTION_GEMMA.open,), "function_gemma", parse_function_gemma),
    ((SEED_OPEN,), "seed_oss", parse_seed_oss),
    ((MINIMAX_M2_OPEN,), "minimax_m2", parse_minimax_m2),
    ((GRANITE_CALL,), "granite", parse_granite),
    ((INTERNLM_ACTION, INTERNLM_INTERPRETER), "internlm", parse_internlm),
    ((TOOL_CALL_OPEN,), "hermes", parse_tool_call_tags),
    ((TOOL_CALLS_OPEN,), "jamba", parse_tool_calls_block),  # after hermes: a cut ``<tool_ca`` names it
    ((FUNCTION_OPEN,), "qwen3_xml", parse_function_blocks),
    ((PYTHON_TAG,), "llama3", parse_llama_python_tag),
    ((PYTHON_START,), "pythonic", parse_llama4),
    ((PHI4_CALLS,), "phi4_mini", parse_phi4),
)


_OPENERS: dict[str, tuple[str, ...]] = {fmt: markers for markers, fmt, _ in _MARKED}
_OPENERS["hermes"] = _OPENERS["qwen3_xml"] = (TOOL_CALL_OPEN, FUNCTION_OPEN)
_FIRST_MARKERS = tuple(dict.fromkeys(marker for markers, _, _ in _MARKED for marker in markers))


def begun_call(text: str, why: str, path: str) -> Malformed | None:
    """The ``cut_off`` fault of ``text``, an output known to be cut off (``why``: the finish reason
    said so, or the stream lost its end) that stops inside the opening marker of a call of any text
    format (``…<tool_ca``, ``[TOOL_C``, down to its first character), or whose visible text is the
    head of a call written without a marker (``{"na``, ``[{"name"``, ```` ```json\n{"na ````,
    ``[get_weather``; see :mod:`actionspace.parse._heads`): the cut came as the model began a
    call. None when ``text`` stops otherwise.

    Only for output known to be cut: whole text ending with ``<tool`` is words (see
    :func:`_cut_in_marker` for text whose earlier calls say which format is in use).
    """
    best = found = ""
    for marker in _FIRST_MARKERS:
        for size in range(len(marker) - 1, len(best), -1):
            if text.endswith(marker[:size]):
                at = len(text) - size
                if marker[0].isalnum() and at > 0 and not text[at - 1].isspace():
                    break  # a marker spelt in letters (``functools[``) begins a word: ``of`` is words
                best = marker[:size]
                found = marker
                break
    if best:
        pos, stops = len(text) - len(best), f"inside {found!r} ({best!r})"
    else:
        head = _call_head(text)
        if head is None:
            return None
        pos, stops = head, f"in the head of a call ({snippet(text, head)!r})"
    return Malformed(
        "cut_off",
        f"the output was cut off before its end ({why}) as a call began: it stops {stops}; no call "
        "ran: emit the call again, whole",
        pos=pos,
        source=text,
        path=path,
    )


def _call_head(text: str) -> int | None:
    """Where the visible text of ``text`` begins when all of it is the head of a call written
    without an opening marker (:func:`~actionspace.parse._heads.is_call_head`), else None."""
    view, _ = _split_reasoning(text, Collector())
    visible = _strip_terminators(view.text)
    start = skip_ws(visible, 0)
    if not is_call_head(visible[start:].rstrip()):
        return None
    return view.original(start)


def _cut_in_marker(text: str, fmt: str, coll: Collector) -> None:
    """Raise ``truncated`` when ``text``, in which calls of format ``fmt`` were read, ends inside
    the opening marker of another call of that format (``…</tool_call><tool_ca``): the output was
    cut as the model began it. A lone first character (``<``) counts only right after a call, so
    words ending with ``<`` stay content."""
    if not coll.calls:
        return
    for marker in _OPENERS.get(fmt, ()):
        for size in range(len(marker) - 1, 0, -1):
            if not text.endswith(marker[:size]):
                continue
            if size == 1 and (coll.content[-1:] or [""])[0] != marker[0]:
                break
            raise Malformed(
                "truncated",
                f"the output stops inside {marker!r} ({marker[:size]!r}): it was cut off as another call "
                "began; emit the calls again, whole",
                pos=len(text) - size,
            )


class _View:
    """The visible text (reasoning removed) and the map from its offsets back to the original."""

    def __init__(self, original: str, spans: list[tuple[int, int]]) -> None:
        self.visible_starts: list[int] = []
        self.original_starts: list[int] = []
        pieces: list[str] = []
        size = 0
        for start, end in spans:
            self.visible_starts.append(size)
            self.original_starts.append(start)
            pieces.append(original[start:end])
            size += end - start
        self.text = "".join(pieces)

    def original(self, pos: int) -> int:
        i = max(bisect.bisect_right(self.visible_starts, pos) - 1, 0)
        return self.original_starts[i] + pos - self.visible_starts[i] if self.original_starts else pos


def _earliest_open(finder: Finder, pos: int) -> tuple[int, str, str]:
    best = (-1, "", "")
    for opener, closer in _REASONING_TAGS:
        found = finder.find(opener, pos)
        if found >= 0 and (best[0] < 0 or found < best[0]):
            best = (found, opener, closer)
    return best


def _add_reasoning(coll: Collector, text: str, opener: str) -> None:
    if opener == GEMMA4_CHANNEL:
        text = text.lstrip().removeprefix("thought")
    coll.add_reasoning(text)


def _split_reasoning(text: str, coll: Collector) -> tuple[_View, Malformed | None]:
    finder = Finder(text)
    # a byte order mark (text saved as UTF-8 with BOM) is no part of the output: left out of the
    # visible text, so a call written bare after it is read as one, not shown as the answer
    pos, spans, fault = (1 if text.startswith(_BOM) else 0), [], None
    first_open = _earliest_open(finder, 0)[0]
    # the earliest closer ends the reasoning the prompt opened, whichever its family: then a
    # stream's reasoning is settled as soon as any tag arrived (a later closer changes nothing)
    orphans = [(at, closer) for _, closer in _REASONING_TAGS if (at := finder.find(closer, 0)) >= 0]
    if orphans:
        orphan, closer = min(orphans)
        if first_open < 0 or orphan < first_open:
            coll.add_reasoning(text[pos:orphan])
            pos = orphan + len(closer)
    while True:
        start, opener, closer = _earliest_open(finder, pos)
        if start < 0:
            spans.append((pos, len(text)))
            break
        spans.append((pos, start))
        close = finder.find(closer, start + len(opener))
        if opener == GEMMA4_CHANNEL:
            # Gemma 4 may open a call before it closes its thought channel: the call ends the thought.
            call = finder.find(GEMMA4.open, start + len(opener))
            if call >= 0 and (close < 0 or call < close):
                _add_reasoning(coll, text[start + len(opener) : call], opener)
                pos = call
                continue
        if close < 0:
            _add_reasoning(coll, text[start + len(opener) :], opener)
            fault = Malformed("unterminated_reasoning", f"{opener} is never closed by {closer}", pos=start)
            break
        _add_reasoning(coll, text[start + len(opener) : close], opener)
        pos = close + len(closer)
    return _View(text, spans), fault


def prompt_opened(text: str) -> str:
    """``text``, written after a reasoning opener the prompt ended with (``<think>``), as
    :func:`parse_text` reads it: with an opener before it while no reasoning closer came, so that all
    of it is reasoning and a call drafted there is no call (a ``unterminated_reasoning`` fault); else
    ``text`` itself (the earliest closer ends the reasoning, an orphan :func:`parse_text` reads)."""
    if not text.strip() or any(closer in text for closer in REASONING_CLOSERS):
        return text
    return _REASONING_TAGS[0][0] + text


def _strip_terminators(text: str, keep: tuple[str, ...] = ()) -> str:
    """``text`` without the end-of-turn tokens (and whitespace) at its end, cut once by index; the
    last of them that is one of ``keep`` (and what precedes it) stays."""
    end = len(text)
    while True:
        while end > 0 and text[end - 1].isspace():
            end -= 1
        if not text.endswith(_TERMINATORS, 0, end) or (keep and text.endswith(keep, 0, end)):
            return text[:end] if end < len(text) else text
        end -= next(len(marker) for marker in _TERMINATORS if text.endswith(marker, 0, end))


def visible_text(text: str) -> str:
    """``text`` as the format parsers read it: reasoning blocks removed, end-of-turn tokens stripped."""
    return _strip_terminators(_split_reasoning(text, Collector())[0].text)


def parse_text_or_bytes(
    raw: str | bytes | bytearray | memoryview, coll: Collector, *, strict: bool, path: str
) -> None:
    """Decode bytes as UTF-8 (a bad byte is a ``parse_error`` at its offset), then :func:`parse_text`.
    Bytes that stop inside their last character were cut there: read as the characters before it."""
    if isinstance(raw, str):
        parse_text(raw, coll, strict=strict, path=path)
        return
    data = bytes(raw)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.reason != "unexpected end of data" or exc.end < len(data):
            fault = Malformed(
                "invalid_utf8", f"byte {exc.start} is not valid UTF-8 ({exc.reason})", path=path
            )
            coll.fail(fault, "bytes", pos=exc.start)
            return
        text = data[: exc.start].decode("utf-8")  # as the text cut one character earlier reads
    parse_text(text, coll, strict=strict, path=path)


def parse_text(text: str, coll: Collector, *, strict: bool = True, path: str = "$") -> None:
    """Add the calls, content and reasoning of one model output to ``coll``.

    ``strict`` (a top-level string) treats JSON that is not a call as a fault; otherwise (message
    content) such JSON is plain content.
    """
    view, reasoning_fault = _split_reasoning(text, coll)
    visible = _strip_terminators(view.text)
    fmt, parser = _detect(visible, strict)
    if fmt == "harmony":  # its end token tells a call without arguments from one cut before them
        visible = _strip_terminators(view.text, keep=HARMONY_ENDS)
    if fmt == "text" and GEMMA4_CHANNEL in text and visible.lstrip().startswith("call:"):
        fmt, parser = GEMMA4.fmt, parse_gemma4_after_thought
    coll.recent = None
    try:
        parser(visible, coll)
        _cut_in_marker(visible, fmt, coll)
    except Malformed as raised:
        fault = cut_in_token(visible, raised)
        if path != "$":
            fault.details.setdefault("path", path)
        pos = view.original(fault.pos) if fault.pos is not None and fault.source is None else None
        coll.fail(fault, coll.recent or fmt, text=text, pos=pos)
    if reasoning_fault is not None:
        coll.fail(reasoning_fault, coll.format or "text", text=text, pos=reasoning_fault.pos)


def _detect(text: str, strict: bool) -> tuple[str, TextParser]:
    # The format whose marker comes first wins: a marker of another format further on sits
    # inside an argument or the text (a Hermes call whose text argument mentions [TOOL_CALLS]).
    best: tuple[int, str, TextParser] | None = None
    for markers, fmt, parser in _MARKED:
        for marker in markers:
            at = text.find(marker, 0, len(text) if best is None else best[0] + len(marker))
            if at >= 0 and (best is None or at < best[0]):
                best = (at, fmt, parser)
    if best is not None:
        return best[1], best[2]
    start = skip_ws(text, 0)
    pythonic = _pythonic_start(text, start)
    if text.startswith("{", start) or (text.startswith("[", start) and not pythonic):
        return "json", lambda t, c: _bare_json(t, c, start, strict)
    if pythonic:
        return "pythonic", _pythonic_list
    if "```" in text:
        return "text", _fences
    return "text", _plain


def _pythonic_start(text: str, start: int) -> bool:
    """Whether ``text`` opens a pythonic call list at ``start`` (``[name(``): a name in ASCII, or
    one that reads as such once its invisible characters are dropped and it is folded as Python
    folds names (``[get_ｗeather(``, ``[send\u200b_sms(``). Such a name is a call written wrong, a
    ``parse_error`` for the model to correct (_pythonic.py), never words to show as the answer."""
    if _PYTHONIC_START.match(text, start):
        return True
    near = _NEAR_PYTHONIC.match(text, start)
    if near is None or near.group(1).isascii():
        return False
    name = "".join(c for c in near.group(1) if unicodedata.category(c) != "Cf")
    return _ASCII_NAME.fullmatch(unicodedata.normalize("NFKC", name)) is not None


def _plain(text: str, coll: Collector) -> None:
    coll.note("text")
    coll.add_content(text)


def _pythonic_list(text: str, coll: Collector) -> None:
    coll.note("pythonic")
    start = skip_ws(text, 0)
    for call in parse_call_list(text[start:].rstrip(), start):
        coll.add_call(call)


def _json_format(value: object) -> str | None:
    if isinstance(value, list):
        return _json_format(value[0]) if value else "json"
    if isinstance(value, dict) and classify(value) == "generic":
        return "llama3_json" if "parameters" in value else "json"
    return None


def _check_shape(value: object, at: int) -> None:
    items = value if isinstance(value, list) else [value]
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            kind = type(item).__name__
            raise Malformed("not_a_call", f"JSON value {i} is a {kind}, not a call object", pos=at)


def _json_is_calls(text: str, start: int, strict: bool) -> bool:
    """Whether JSON-looking text should be read as calls rather than kept as plain text.

    Text that starts like a call object is always read as calls (a broken one is a fault). Other
    JSON is read as calls only when it is made of call objects, or, at top level, when the whole
    output is JSON (then a non-call is a fault); ``[1] Smith et al.`` stays prose.
    """
    try:
        values = list(iter_json_values(text, start))
    except Malformed:
        return _CALLISH.match(text, start) is not None
    if all(callish_value(value) for value, _, _ in values):
        return True
    return strict and values[-1][2] >= len(text)


def _bare_json(text: str, coll: Collector, start: int, strict: bool) -> None:
    if (not strict or text.startswith("[", start)) and not _json_is_calls(text, start, strict):
        _plain(text, coll)
        return
    rest = start
    for value, at, after in iter_json_values(text, start):
        rest = after
        fmt = _json_format(value)
        if fmt is not None:
            coll.note(fmt)
        _check_shape(value, at)
        try:
            feed(value, coll, path="$", strict=True)
        except Malformed as fault:
            raise fault.at(at) from None
        if fmt is not None:
            coll.note(fmt)
    coll.add_content(text[rest:])


def _fence_payload(text: str, lang: str, body: int, end: int) -> Any:
    start = skip_ws(text, body, end)
    if lang == "tool_code":
        return parse_statements(text[start:end].rstrip(), start)
    if lang not in JSON_FENCES or start >= end:
        return None
    try:
        value, after = decode_json_at(text, start, end, what="fenced JSON")
    except Malformed:
        if _CALLISH.match(text, start):
            raise
        return None
    if skip_ws(text, after, end) < end or not callish_value(value):
        return None
    return value


def _fences(text: str, coll: Collector) -> None:
    pos = last = 0
    found = False
    while (tick := text.find("```", pos)) >= 0:
        opener = _FENCE_OPEN.match(text, tick)
        if opener is None:
            pos = tick + 3
            continue
        lang = opener.group(1).lower()
        fmt = "gemma_tool_code" if lang == "tool_code" else "fenced_json"
        close = text.find("```", opener.end())
        end = len(text) if close < 0 else close
        pos = end + 3
        try:
            try:
                payload = _fence_payload(text, lang, opener.end(), end)
            except Malformed:
                if close < 0 and lang == "tool_code":  # code the cut stopped before its end
                    raise Malformed(
                        "truncated", "the tool_code fence stops before its end", pos=tick
                    ) from None
                raise
            if payload is None:
                continue
            if close < 0:
                raise Malformed("unterminated_fence", "``` fence is never closed", pos=tick)
            coll.note(fmt)
            coll.add_content(text[last:tick])
            found, last = True, pos
            feed(payload, coll, path="$", strict=True)
        except Malformed as fault:
            fault.fmt = fault.fmt or fmt
            raise fault.at(skip_ws(text, opener.end())) from None
    if not found:
        _plain(text, coll)
        return
    coll.add_content(text[last:])
