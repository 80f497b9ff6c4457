"""gpt-oss harmony messages: reasoning, content and calls to ``functions.NAME``.

An output is a run of messages ``[<|start|>]HEADER<|message|>BODY[END]``; END is ``<|end|>``,
``<|call|>`` or ``<|return|>`` (servers often drop the last one), or the next header. A call's
body that is empty up to the end of the output, without an end token, was cut before its arguments
(a ``truncated`` fault); an empty body that an end token or the next header closes has none::

    <|channel|>analysis<|message|>User wants the weather.<|end|>
    <|start|>assistant<|channel|>commentary to=functions.weather <|constrain|>json<|message|>{"q": 1}<|call|>
    <|start|>assistant to=functions.get_time<|channel|>commentary json<|message|>{}<|call|>
    <|start|>assistant<|channel|>final<|message|>It is sunny.<|return|>

HEADER holds the role (``assistant`` when omitted), ``<|channel|>CHANNEL``, an optional
``to=RECIPIENT`` before or after the channel, and an optional content type (``json`` or
``<|constrain|>json``). Only a recipient ``functions.NAME`` is a call of tool NAME. Messages from
another role, or addressed ``to=assistant`` (tool results), are skipped. A recipient that is not a
function (``to=python``, ``to=browser.search``) is a ``parse_error`` unless ``tools`` offers a
tool of exactly that name: it is never read as a call of some other tool. ``analysis`` bodies are
reasoning; ``final`` and ``commentary`` bodies without a recipient are content. An output that
stops inside an ``analysis`` message (no ``<|end|>``, nothing after it) stopped while the model was
still reasoning, its answer or call unwritten: an ``unterminated_reasoning`` fault, as an open
``<think>`` is (servers drop only the stop token of a ``final`` or ``commentary`` message).
"""

from __future__ import annotations

from dataclasses import dataclass

from actionspace.parse._result import Collector, Malformed
from actionspace.parse._scan import TOOL_NAME, Finder, decode_json_at, expect_end, skip_ws
from actionspace.types import ToolCall

__all__ = ["HARMONY_CHANNEL", "HARMONY_START", "parse_harmony"]

HARMONY_START, HARMONY_CHANNEL, HARMONY_MESSAGE = "<|start|>", "<|channel|>", "<|message|>"
HARMONY_CONSTRAIN = "<|constrain|>"
HARMONY_ENDS = ("<|end|>", "<|call|>", "<|return|>")
_FUNCTIONS = "functions."
_READERS = frozenset({"assistant", "user", "system", "developer", "all"})
_ROLES = frozenset({"assistant", "user", "system", "developer", "tool"})


@dataclass(frozen=True, slots=True)
class Header:
    """What a message header says: who wrote it, on which channel, to whom, in what content type."""

    role: str
    channel: str
    recipient: str
    content_type: str


def read_header(header: str) -> Header:
    """The parts of one header (the text between ``<|start|>`` and ``<|message|>``)."""
    role_part, _, channel_part = header.partition(HARMONY_CHANNEL)
    role_tokens = role_part.replace(HARMONY_CONSTRAIN, " ").split()
    channel_tokens = channel_part.replace(HARMONY_CONSTRAIN, f" {HARMONY_CONSTRAIN} ").split()
    tokens = role_tokens + channel_tokens
    recipient = next((t[3:] for t in tokens if t.startswith("to=")), "")
    role = role_tokens[0] if role_tokens and not role_tokens[0].startswith("to=") else "assistant"
    channel = channel_tokens[0] if channel_tokens and not channel_tokens[0].startswith("to=") else ""
    content_type = ""
    for i, token in enumerate(tokens):
        if token == HARMONY_CONSTRAIN and i + 1 < len(tokens):
            content_type = tokens[i + 1]
        elif token == "json":
            content_type = token
    return Header(role, channel, recipient, content_type)


def parse_harmony(text: str, coll: Collector) -> None:
    """Every harmony message in ``text``; a call only when its JSON body is complete."""
    coll.note("harmony")
    finder = Finder(text)
    pos = 0
    while (message := finder.find(HARMONY_MESSAGE, pos)) >= 0:
        start = finder.find(HARMONY_START, pos, message)
        channel = finder.find(HARMONY_CHANNEL, pos, message)
        if start >= 0:
            coll.add_content(text[pos:start])
            header_at = start + len(HARMONY_START)
        elif channel >= 0:
            header_at = _header_start(text, pos, channel)
            coll.add_content(text[pos:header_at])
        else:
            header_at = pos
        header = read_header(text[header_at:message])
        body = message + len(HARMONY_MESSAGE)
        end, size = _body_end(text, body, finder)
        _message(text, coll, header, header_at, body, end)
        pos = end + size
    dangling = [at for at in (finder.find(HARMONY_START, pos), finder.find(HARMONY_CHANNEL, pos)) if at >= 0]
    if dangling:
        raise Malformed(
            "truncated", f"message header is not followed by {HARMONY_MESSAGE}", pos=min(dangling)
        )
    coll.add_content(text[pos:])


def _header_start(text: str, pos: int, channel: int) -> int:
    """Where a header without ``<|start|>`` begins: at its role or ``to=`` words, else at the channel."""
    words = text[pos:channel].split()
    if all(w.startswith(("to=", _FUNCTIONS)) or w in _ROLES for w in words):
        return pos
    return channel


def _body_end(text: str, body: int, finder: Finder) -> tuple[int, int]:
    best, size = len(text), 0
    for marker in (*HARMONY_ENDS, HARMONY_START, HARMONY_CHANNEL):
        found = finder.find(marker, body)
        if 0 <= found < best:
            best, size = found, (len(marker) if marker in HARMONY_ENDS else 0)
    return best, size


def _message(text: str, coll: Collector, header: Header, at: int, body: int, end: int) -> None:
    if header.role != "assistant" or header.recipient in _READERS:
        return
    if header.recipient:
        coll.add_call(_call(text, coll, header, at, body, end))
    elif header.channel == "analysis":
        coll.add_reasoning(text[body:end])
        if end >= len(text):  # no <|end|> and nothing after: stopped while reasoning, as an open <think>
            raise Malformed(
                "unterminated_reasoning", "the analysis message is never closed by <|end|>", pos=at
            )
    else:
        coll.add_content(text[body:end])


def _call(text: str, coll: Collector, header: Header, at: int, body: int, end: int) -> ToolCall:
    recipient = header.recipient
    if recipient.startswith(_FUNCTIONS):
        name = recipient[len(_FUNCTIONS) :]
    elif coll.offers(recipient):
        name = recipient
    else:
        raise Malformed(
            "unsupported_recipient",
            f"message is addressed to {recipient!r}, which is not a function (expected to=functions.NAME)",
            pos=at,
        )
    if not TOOL_NAME.fullmatch(name):
        raise Malformed("invalid_name", f"recipient {recipient!r} does not name a function", pos=at)
    first = skip_ws(text, body, end)
    if first >= end and end >= len(text):  # no body and no end token: cut before the arguments
        raise Malformed(
            "truncated",
            f"the call to {recipient} stops after {HARMONY_MESSAGE}, before its arguments",
            pos=body,
        )
    if first >= end:
        return ToolCall(name=name, arguments={})
    if header.content_type == "json" or text.startswith(("{", "["), first):
        arguments, after = decode_json_at(text, first, end, what=f"arguments to {recipient}")
        expect_end(text, after, end, "the arguments")
        return ToolCall(name=name, arguments=arguments)
    return ToolCall(name=name, arguments=text[body:end])
