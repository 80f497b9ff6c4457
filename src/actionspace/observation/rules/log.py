"""``log-v1``: command output keeps its exit code, first error block, tail and line counts.

``data`` is ``{"exit_code"?, "first_error_line", "first_error", "tail", "total_lines",
"omitted_lines"}`` plus any small scalar fields the result carried (``command``, ``duration_s``):

* ``first_error``: the first line that reads as an error (``error``, ``exception``, ``fatal``,
  ``panic``, ``FAILED``, ``npm ERR!``, ``ValueError:``, ``Traceback (most recent call last)``,
  ``segmentation fault``; but not ``0 errors``, ``error=0``, ``--fail-fast`` or ``error.log``),
  the three lines before it and the
  block after it: indented and chained lines (a Python traceback, a Java stack with ``Caused by:``)
  are kept whole up to 80 lines, plus up to eight further lines. Longer blocks keep their first 20
  and last 60 lines and up to 10 error lines from between (``Caused by: …``); a gap reads
  ``{"_omitted_lines": n}``. Under a tight budget the error lines of the block are kept longest.
* ``tail``: the last 40 lines after the error block.
* line numbers are 1-based; lines over 400 characters end in ``…[+n chars]``.

Lines are ANSI-colour-stripped when shown. When the budget is tight, fewer tail lines, fewer
context lines and shorter lines are kept, in that order of rungs. The whole input is scanned with
``str.find`` for the keywords first (fast), and only candidate lines are checked with the full
pattern; once the first error block is closed the rest is only counted and its tail kept.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, ClassVar, Final, TypeGuard

from actionspace._canonical import clip_end, normalize
from actionspace.observation.rules._base import (
    LineBuffer,
    Source,
    TextSource,
    TrimRule,
    fit,
    is_stream,
    small_fields,
)

__all__ = ["LogRule", "chain_text", "is_text"]

TAIL_LINES: Final = 40
BEFORE_LINES: Final = 3
AFTER_LINES: Final = 8
BLOCK_HEAD: Final = 20
BLOCK_TAIL: Final = 60
KEY_LINES: Final = 10
"""Error lines (``Caused by: …``) held from the middle of a block longer than head and tail."""
BLOCK_SCAN: Final = 2000
LINE_CHARS: Final = 400
PARTIAL_CAP: Final = 65_536
"""Characters of one unfinished line held while streaming; the rest of an over-long line is counted."""

_KEYWORDS: Final = (
    "error",
    "exception",
    "traceback",
    "fatal",
    "panic",
    "fail",
    "critical",
    "err!",
    "segmentation fault",
)
_ERROR_LINE: Final = re.compile(
    r"""
      (?<!\bno\ )(?<!\b0\ )(?<![-/])(?:\b|(?<=\dm))
      (?:error|exception|fatal|panic|fail(?:ed|ure)?|critical|segmentation\ fault)\b
      (?!\s*[:=]\s*(?:0|none|null|false)\b)(?!\.\w)(?![-/]\w)
    | (?-i:[a-z0-9](?:Error|Exception)\b)
    | traceback\ \(most\ recent\ call\ last\)
    | npm\ err!
    """,
    re.IGNORECASE | re.VERBOSE,
)
_CONTINUATION: Final = re.compile(
    r"[ \t]|Caused by:|During handling of the above exception|The above exception was the direct"
    r"|Traceback \(most recent call last\)|\.\.\. \d+ more|\[Previous line repeated|E {2}|> "
)
_ANSI: Final = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, screen modes
    r"|[\]PX^_][^\x07\x1b]*(?:\x07|\x1b\\|$)"  # OSC/DCS/SOS/PM/APC: titles, links, up to BEL or ST
    r"|[ -/]*[0-~]"  # two-byte escapes and character set switches
    r"|)"  # a lone ESC
)
"""Terminal escape sequences: never shown to the model (nor passed on to a terminal)."""
_OUTPUT_KEYS: Final = ("output", "log", "text", "stdout", "stderr")
_CODE_KEYS: Final = ("exit_code", "returncode", "exit_status")

_RUNGS: Final[tuple[tuple[int, int, int, int, int, int], ...]] = (
    # tail lines, chars per line, lines before the error, error block head, block tail, key lines
    (40, 400, 3, 20, 60, 10),
    (30, 300, 3, 15, 40, 8),
    (20, 240, 2, 10, 30, 6),
    (15, 200, 2, 8, 20, 6),
    (10, 160, 1, 6, 12, 5),
    (8, 120, 1, 4, 8, 4),
    (5, 100, 1, 3, 5, 3),
    (3, 80, 0, 2, 3, 3),
    (2, 80, 0, 1, 2, 2),
    (1, 60, 0, 1, 1, 2),
    (0, 60, 0, 1, 1, 1),
    (0, 40, 0, 1, 0, 1),
    (0, 30, 0, 1, 0, 0),
)

_Line = tuple[int, str, int]
"""(1-based number, first LINE_CHARS characters, full length)."""

_SEARCHING, _COLLECTING, _DONE = 0, 1, 2


def is_text(value: object) -> TypeGuard[TextSource]:
    """Whether ``value`` is text a log or search rule can read."""
    if isinstance(value, str | bytes | bytearray | memoryview) or is_stream(value):
        return True
    return isinstance(value, list | tuple) and all(isinstance(line, str) for line in value)


def chain_text(parts: Sequence[TextSource]) -> Iterator[str | bytes]:
    """The chunks of ``parts`` one after another, a newline between parts that lack one.

    A list or tuple of strings is read as lines.
    """
    ended = True
    for part in parts:
        if not ended:
            yield "\n"
        ended = True
        for chunk in _chunks_of(part):
            if chunk:
                yield chunk
                ended = chunk.endswith(b"\n" if isinstance(chunk, bytes) else "\n")


def _chunks_of(part: TextSource) -> Iterable[Any]:
    if isinstance(part, str | bytes):
        return (part,)
    if isinstance(part, bytearray | memoryview):
        return (bytes(part),)
    if isinstance(part, list | tuple):
        return (line if line.endswith("\n") else line + "\n" for line in part)
    return part


class LogRule(TrimRule):
    """``log-v1`` (see the module docstring)."""

    name: ClassVar[str] = "log"
    version: ClassVar[str] = "1"

    def __init__(self, *, max_bytes: int, fields: Mapping[str, Any] | None = None) -> None:
        super().__init__(max_bytes=max_bytes, fields=fields)
        self._buffer = LineBuffer(PARTIAL_CAP)
        self._count = 0
        self._tail: deque[_Line] = deque(maxlen=TAIL_LINES)
        self._state = _SEARCHING
        self._before: list[_Line] = []
        self._head: list[_Line] = []
        self._block_tail: deque[_Line] = deque(maxlen=BLOCK_TAIL)
        self._keys: list[_Line] = []
        self._block_count = 0
        self._window = AFTER_LINES
        self._cut = False

    @classmethod
    def unwrap(cls, value: object) -> Source | None:
        if is_text(value):
            return Source(text=value if not isinstance(value, list | tuple) else chain_text([value]))
        if isinstance(value, Mapping):
            outputs = [value[k] for k in _OUTPUT_KEYS if value.get(k) is not None]
            if not outputs or not all(is_text(part) for part in outputs):
                return None
            fields: dict[str, Any] = {}
            for key in _CODE_KEYS:
                if key in value:
                    fields["exit_code"] = normalize(value[key])
                    break
            fields.update(small_fields(value, (*_OUTPUT_KEYS, *_CODE_KEYS)))
            return Source(fields=fields, text=chain_text(outputs))
        code, stdout = getattr(value, "returncode", None), getattr(value, "stdout", None)
        if isinstance(code, int) and (stdout is None or is_text(stdout)):
            parts = [p for p in (stdout, getattr(value, "stderr", None)) if p is not None and is_text(p)]
            return Source(fields={"exit_code": code}, text=chain_text(parts))
        return None

    def feed(self, chunk: str) -> None:
        first, block = self._buffer.feed(chunk)
        if first is not None:
            self._one(*first)
        if block is not None:
            self._block(block)

    def finish(self) -> tuple[Any, bool]:
        last = self._buffer.flush()
        if last is not None:
            self._one(*last)
        data = fit(_RUNGS, self._build, self.max_bytes, self._minimal)
        return data, self._cut

    # -- reading -------------------------------------------------------------------------------

    def _one(self, text: str, length: int) -> None:
        if self._state == _COLLECTING and self._collect(text[:LINE_CHARS], length):
            return
        if self._state == _SEARCHING and _ERROR_LINE.search(text):
            self._state = _COLLECTING
            self._collect(text[:LINE_CHARS], length)
            return
        self._push(text[:LINE_CHARS], length)

    def _block(self, block: str) -> None:
        pos, n = 0, len(block)
        while pos <= n:
            if self._state == _COLLECTING:
                pos = self._collect_from(block, pos)
                continue
            if self._state == _SEARCHING:
                hit = _find_error(block, pos)
                if hit >= 0:
                    if hit > pos:
                        self._bulk(block, pos, hit - 1)
                    self._state = _COLLECTING
                    pos = hit
                    continue
            self._bulk(block, pos, n)
            return

    def _bulk(self, block: str, start: int, end: int) -> None:
        """Count the lines of ``block[start:end]`` and keep the last of them for the tail."""
        count = block.count("\n", start, end) + 1
        spans: list[tuple[int, int]] = []
        stop = end
        for _ in range(min(TAIL_LINES, count)):
            newline = block.rfind("\n", start, stop)
            begin = start if newline < 0 else newline + 1
            spans.append((begin, stop))
            stop = begin - 1
        first = self._count + count - len(spans) + 1
        for offset, (begin, stop) in enumerate(reversed(spans)):
            self._tail.append((first + offset, block[begin : min(stop, begin + LINE_CHARS)], stop - begin))
        self._count += count

    def _collect_from(self, block: str, pos: int) -> int:
        n = len(block)
        while pos <= n and self._state == _COLLECTING:
            end = block.find("\n", pos)
            if end < 0:
                end = n
            if not self._collect(block[pos : min(end, pos + LINE_CHARS)], end - pos):
                return pos
            pos = end + 1
        return pos

    def _collect(self, text: str, length: int) -> bool:
        """Add a line to the error block; False (block closed, line not taken) once it has ended."""
        if self._block_count == 0:
            self._before = list(self._tail)[-BEFORE_LINES:]
        elif _CONTINUATION.match(text) or not text.strip():
            pass
        elif self._window == 0:
            self._state = _DONE
            return False
        else:
            self._window -= 1
        self._push(text, length)
        line = self._tail[-1]
        if len(self._head) < BLOCK_HEAD:
            self._head.append(line)
        else:
            if len(self._block_tail) == BLOCK_TAIL and len(self._keys) < KEY_LINES:
                evicted = self._block_tail[0]
                if _is_key(evicted[1]):
                    self._keys.append(evicted)
            self._block_tail.append(line)
        self._block_count += 1
        if self._block_count >= BLOCK_SCAN:
            self._state = _DONE
        return True

    def _push(self, text: str, length: int) -> None:
        self._count += 1
        self._tail.append((self._count, text, length))

    # -- rendering -----------------------------------------------------------------------------

    def _build(self, rung: tuple[int, int, int, int, int, int]) -> dict[str, Any]:
        tail_n, chars, before_n, head_n, back_n, key_n = rung
        shown: list[Any] = []
        kept = 0
        clipped = False
        block_end = 0
        error_line = None
        if self._block_count:
            error_line = self._head[0][0]
            block_end = error_line + self._block_count - 1
            before = self._before[-before_n:] if before_n else []
            lines = [*before, *self._block_lines(head_n, back_n, key_n)]
            previous = lines[0][0] - 1
            for line in lines:
                if line[0] > previous + 1:
                    shown.append({"_omitted_lines": line[0] - previous - 1})
                text, cut = _show(line, chars)
                shown.append(text)
                clipped |= cut
                previous = line[0]
            if previous < block_end:
                shown.append({"_omitted_lines": block_end - previous})
            kept = len(lines)
        after = [line for line in self._tail if line[0] > block_end]
        tail = []
        for line in after[-tail_n:] if tail_n else []:
            text, cut = _show(line, chars)
            tail.append(text)
            clipped |= cut
        kept += len(tail)
        omitted = self._count - kept
        self._cut = omitted > 0 or clipped
        return {
            **self.fields,
            "first_error_line": error_line,
            "first_error": shown,
            "tail": tail,
            "total_lines": self._count,
            "omitted_lines": omitted,
        }

    def _block_lines(self, head_n: int, back_n: int, key_n: int) -> list[_Line]:
        """The block's first ``head_n`` and last ``back_n`` lines and up to ``key_n`` error lines
        (the latest ones) from between them, in order."""
        stored = [*self._head, *self._keys, *self._block_tail]
        if self._block_count <= head_n + back_n:
            return stored
        chosen = set(range(min(head_n, len(stored))))
        chosen.update(range(max(len(stored) - back_n, 0), len(stored)))
        keys = [n for n, line in enumerate(stored) if n not in chosen and _is_key(line[1])]
        chosen.update(keys[len(keys) - key_n :] if key_n else ())
        return [stored[n] for n in sorted(chosen)]

    def _minimal(self) -> dict[str, Any]:
        self._cut = self._count > 0
        data: dict[str, Any] = {"exit_code": self.fields["exit_code"]} if "exit_code" in self.fields else {}
        error_line = self._head[0][0] if self._head else None
        data.update(
            first_error_line=error_line,
            first_error=[],
            tail=[],
            total_lines=self._count,
            omitted_lines=self._count,
        )
        return data


def _is_key(text: str) -> bool:
    """A line that names what went wrong: ``KeyError: …``, ``Caused by: …``, ``error: …``."""
    return not text[:1].isspace() and _ERROR_LINE.search(text) is not None


def _show(line: _Line, chars: int) -> tuple[str, bool]:
    _, text, length = line
    clean = _ANSI.sub("", text) if "\x1b" in text else text
    length -= len(text) - len(clean)
    if clean.endswith("\r") and length == len(clean):
        clean, length = clean[:-1], length - 1
    return clip_end(clean, chars, length), length > chars


def _find_error(block: str, pos: int) -> int:
    """Start of the first error line in ``block`` at or after ``pos`` (a line start), or -1."""
    low = block.lower()
    if len(low) != len(block):
        match = _ERROR_LINE.search(block, pos)
        if match is None:
            return -1
        newline = block.rfind("\n", pos, match.start())
        return pos if newline < 0 else newline + 1
    found = [low.find(word, pos) for word in _KEYWORDS]
    while True:
        live = [at for at in found if at >= 0]
        if not live:
            return -1
        at = min(live)
        newline = block.rfind("\n", pos, at)
        start = pos if newline < 0 else newline + 1
        end = block.find("\n", at)
        if end < 0:
            end = len(block)
        if _ERROR_LINE.search(block, start, end):
            return start
        pos = end + 1
        found = [
            at if at < 0 or at >= pos else low.find(word, pos)
            for at, word in zip(found, _KEYWORDS, strict=True)
        ]
