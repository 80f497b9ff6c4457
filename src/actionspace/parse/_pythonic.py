"""Pythonic calls, ``[get_weather(city="Paris"), f(x=[1, 2])]``, read with ``ast`` and literals only."""

from __future__ import annotations

import ast
import gc
import math
import re
import unicodedata
import warnings
from typing import Any

from actionspace.parse._result import Malformed
from actionspace.parse._scan import unreadable
from actionspace.types import ToolCall

__all__ = ["parse_call_list", "parse_statements"]

_NEWLINE = re.compile("\n")
_LINE_BREAK = re.compile("\r\n|\r|\n")
_TRUNCATION_HINTS = ("was never closed", "unterminated", "unexpected EOF", "expected ':'")
_NUMBER_HEAD = re.compile(r"[\w.]*[eE]?[+-]?")


def _cut_literal(text: str, message: str, line: int | None, column: int) -> bool:
    """Whether ``text`` stops inside the number ``ast`` calls an invalid literal (``-1.5e``, ``0x``)."""
    if "literal" not in message or line != text.count("\n") + 1:
        return False
    return _NUMBER_HEAD.fullmatch(text, text.rfind("\n") + 1 + column) is not None


class _Source:
    """Maps ``ast`` line/column positions back to offsets in the text they came from."""

    def __init__(self, text: str, base: int) -> None:
        self.text = text
        self.base = base
        self._starts: list[int] | None = None
        self._folds: bool | None = None
        self._lines: dict[int, bytes] = {}
        self._line_texts: list[str] | None = None

    @property
    def starts(self) -> list[int]:
        """Offsets where each line begins; found only when a position is asked for."""
        if self._starts is None:
            self._starts = [0, *(m.end() for m in _NEWLINE.finditer(self.text))]
        return self._starts

    def offset(self, line: int | None, column: int | None, *, byte_column: bool) -> int:
        if not line:
            return self.base
        line_start = self.starts[min(line, len(self.starts)) - 1]
        column = max(column or 0, 0)
        if byte_column:
            line_text = self.text[line_start:].split("\n", 1)[0]
            column = len(line_text.encode("utf-8")[:column].decode("utf-8", "ignore"))
        return self.base + line_start + column

    def node(self, node: ast.AST) -> int:
        return self.offset(getattr(node, "lineno", None), getattr(node, "col_offset", None), byte_column=True)

    @property
    def folds(self) -> bool:
        """Whether a name may be written otherwise than ``ast`` reads it: Python folds names to NFKC
        (``get_ｗeather`` is ``get_weather`` to it), so only text that is not NFKC may hold one."""
        if self._folds is None:
            self._folds = not (self.text.isascii() or unicodedata.is_normalized("NFKC", self.text))
        return self._folds

    def written(self, line: int, start: int, end: int | None = None) -> str:
        """The text of ``line`` (from 1, as ``ast`` counts lines: ``\r`` ends one too) between byte
        columns ``start`` and ``end``, as written."""
        encoded = self._lines.get(line)
        if encoded is None:
            if self._line_texts is None:
                self._line_texts = _LINE_BREAK.split(self.text)
            texts = self._line_texts
            text = texts[line - 1] if 0 < line <= len(texts) else ""
            encoded = self._lines[line] = text.encode("utf-8", "surrogatepass")
        return encoded[start:end].decode("utf-8", "replace")


def _syntax(text: str, mode: str, src: _Source) -> ast.AST:
    try:
        with warnings.catch_warnings():
            # Invalid escapes such as "\s" in a model's string literal are kept as written.
            warnings.simplefilter("ignore")
            # An AST holds no cycles, yet building a large one triggers the cyclic collector over
            # and over (time grows faster than the text): it is paused while the tree is built.
            collecting = gc.isenabled()
            gc.disable()
            try:
                tree = ast.parse(text, mode=mode)
            finally:
                if collecting:
                    gc.enable()
    except SyntaxError as exc:
        message = exc.msg or "invalid syntax"
        column = (exc.offset or 1) - 1
        cut = any(h in message for h in _TRUNCATION_HINTS) or _cut_literal(text, message, exc.lineno, column)
        reason = "truncated" if cut else "invalid_syntax"
        where = src.offset(exc.lineno, column, byte_column=False)
        if "integer string conversion" in message:  # the interpreter's advice is none the model can take
            fault = unreadable(ValueError(message), "the call list")
            raise fault.at(where) from None
        raise Malformed(reason, f"not a valid call list ({message})", pos=where) from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise Malformed(
            "invalid_syntax", f"not a valid call list ({type(exc).__name__})", pos=src.base
        ) from None
    return tree


def _as_written(read: str, written: str, node: ast.AST, src: _Source) -> None:
    """Refuse a name ``ast`` read otherwise than it is written: a tool or argument name that only
    looks like an offered one would run it, where the JSON formats match names as written."""
    if written.strip() != read:
        raise Malformed(
            "invalid_name",
            f"the name {written.strip()!r} is read as {read!r}: write names in the characters offered",
            pos=src.node(node),
        )


def _dotted(node: ast.expr, src: _Source) -> str:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        if src.folds and node.end_lineno is not None and node.end_col_offset is not None:
            tail = src.written(node.end_lineno, 0, node.end_col_offset).rsplit(".", 1)[-1]
            _as_written(node.attr, tail, node, src)
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        raise Malformed(
            "invalid_callee", "a call must name a function (name or dotted.name)", pos=src.node(node)
        )
    if src.folds:
        _as_written(node.id, src.written(node.lineno, node.col_offset, node.end_col_offset), node, src)
    parts.append(node.id)
    return ".".join(reversed(parts))


def _jsonable(value: Any, node: ast.AST, src: _Source) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        raise Malformed("non_json_value", f"{value!r} has no JSON form", pos=src.node(node))
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, node, src) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise Malformed("non_json_value", "dict keys must be strings", pos=src.node(node))
        return {k: _jsonable(v, node, src) for k, v in value.items()}
    kind = type(value).__name__
    raise Malformed("non_json_value", f"a {kind} literal has no JSON form", pos=src.node(node))


def _call(node: ast.expr, src: _Source) -> ToolCall:
    if not isinstance(node, ast.Call):
        raise Malformed("not_a_call", f"expected a call, found {type(node).__name__}", pos=src.node(node))
    name = _dotted(node.func, src)
    if node.args:
        raise Malformed(
            "positional_argument", f"{name}() takes keyword arguments only", pos=src.node(node.args[0])
        )
    arguments: dict[str, Any] = {}
    for keyword in node.keywords:
        if keyword.arg is None:
            raise Malformed("unpacked_argument", f"{name}() cannot unpack **arguments", pos=src.node(keyword))
        if src.folds:
            same_line = keyword.value.lineno == keyword.lineno
            head = src.written(
                keyword.lineno, keyword.col_offset, keyword.value.col_offset if same_line else None
            )
            _as_written(keyword.arg, head.split("=", 1)[0], keyword, src)
        if keyword.arg in arguments:  # ``ast.parse`` takes what the compiler refuses
            raise Malformed(
                "duplicate_key", f"{name}() is given argument {keyword.arg!r} twice", pos=src.node(keyword)
            )
        try:
            value = ast.literal_eval(keyword.value)
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
            raise Malformed(
                "non_literal_argument",
                f"{name}({keyword.arg}=...) is not a literal value",
                pos=src.node(keyword.value),
            ) from None
        arguments[keyword.arg] = _jsonable(value, keyword.value, src)
        twice = _key_twice(keyword.value)
        if twice is not None:
            raise Malformed(
                "duplicate_key", f"the key {str(twice.value)[:40]!r} is given twice", pos=src.node(twice)
            )
    return ToolCall(name=name, arguments=arguments)


def _key_twice(node: ast.AST) -> ast.Constant | None:
    """The first key a dict literal in ``node`` gives again: readers disagree on which value counts
    (``literal_eval`` keeps the last), so a call never carries one, as JSON formats refuse it."""
    for found in ast.walk(node):
        if isinstance(found, ast.Dict):
            seen: set[str] = set()
            for key in found.keys:
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    if key.value in seen:
                        return key
                    seen.add(key.value)
    return None


def _calls_of(node: ast.expr, src: _Source) -> list[ToolCall]:
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_call(element, src) for element in node.elts]
    return [_call(node, src)]


def parse_call_list(text: str, base: int = 0) -> list[ToolCall]:
    """``[f(a=1), g.h(b="x")]`` (or one bare call) → calls. ``base`` offsets reported positions."""
    src = _Source(text, base)
    tree = _syntax(text, "eval", src)
    assert isinstance(tree, ast.Expression)
    return _calls_of(tree.body, src)


def parse_statements(text: str, base: int = 0) -> list[ToolCall]:
    """One call (or call list) per statement, as in a Gemma ``tool_code`` block."""
    src = _Source(text, base)
    tree = _syntax(text, "exec", src)
    assert isinstance(tree, ast.Module)
    calls: list[ToolCall] = []
    for statement in tree.body:
        if not isinstance(statement, ast.Expr):
            kind = type(statement).__name__
            raise Malformed(
                "not_a_call", f"expected a call, found a {kind} statement", pos=src.node(statement)
            )
        calls.extend(_calls_of(statement.value, src))
    return calls
