"""Parsing while the output streams in: calls are reported only once complete.

:class:`StreamParser` takes deltas of one of two kinds (the first delta decides):

* raw model text (``str``), token by token or in any chunks, in any format :func:`parse` reads;
* provider events (mappings): OpenAI chat chunks (``choices[0].delta.tool_calls[].function.
  arguments`` pieces, or the ``delta`` itself; of a stream of several candidates, the first's
  chunks only, as a completion of several choices is read as its first), Responses events
  (``response.output_item.added``, ``response.function_call_arguments.delta`` / ``.done``,
  ``response.output_item.done``, ``response.output_text.delta``) and Anthropic events
  (``content_block_start`` of a ``tool_use``, ``input_json_delta``, ``content_block_stop``,
  ``text_delta``, ``thinking_delta``) and Gemini chunks (each a ``GenerateContentResponse`` whose
  ``functionCall`` parts are whole calls: parse/_gemini.py; an SDK's event object is read by its
  ``model_dump()``). A custom (free-form) tool's call — a chat ``custom`` entry,
  a Responses ``custom_tool_call`` with ``response.custom_tool_call_input.delta`` — keeps its input
  text as its arguments; the input an Anthropic server tool streams (``server_tool_use``,
  ``mcp_tool_use``: the provider runs it) is no call of the client's.

:meth:`StreamParser.feed` returns the calls completed by that delta; :meth:`StreamParser.finish`
returns the :class:`ParseResult` of the whole output, the same as :func:`parse` of the text (or
of the assembled message) however it was split. A call reported by ``feed`` is never changed (a
stream whose later events change it finishes as a ``parse_error``, ``changed_after_complete``):
raw text is re-read at most once per delta that could close a call (and, past 8 KiB, only after
the text has grown by an eighth, or at a delta ending with a token that closes a call while such
re-reads have cost less than :data:`SEAL_BUDGET` times the text), and a call counts as complete
once a later call follows it or the text ends with a token that closes a call. The calls of
provider events are in the message's order (their ``output_index`` or ``index``), however their
events were interleaved or reordered.

A stream the provider ends as cut off by the token limit or stopped by its filters (a chat
``finish_reason`` of ``length`` or ``content_filter``, an Anthropic ``message_delta`` with
``stop_reason`` ``max_tokens`` or ``refusal``, a Responses ``response.incomplete``, ``failed`` or
``cancelled``, or an output item done ``incomplete``; for raw text, :meth:`StreamParser.end` given
the reason the server sent apart from the text) finishes as the same output whole would parse: a
``parse_error`` of reason ``cut_off`` keeping none of its calls, even when the arguments' JSON looks
closed. That signal comes last, after ``feed`` may have reported the calls it voids (an Anthropic
call is complete at its ``content_block_stop``, before the ``message_delta`` that says ``max_tokens``):
``feed``'s calls are for showing progress, never for running. What to act on is the whole stream,
once it ended: :meth:`StreamParser.output` is the output as :func:`parse`, ``call_ids`` and
``Session.handle`` read it (``s.handle(stream.output())``), so a cut message's calls end as
``parse_error`` observations, one per call id, whose recovery is to re-emit them. Provider
events that stop with no finish signal at all (a dropped connection, whose lost end may have
said ``max_tokens``) finish as ``cut_off`` too once they hold a call.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from actionspace.parse._cut_text import cut_text
from actionspace.parse._gemini import name_calls, stream_chunk
from actionspace.parse._gemini_shapes import is_chunk
from actionspace.parse._progress import (
    CLOSING_CHARS,
    EAGER_LIMIT,
    Pending,
    StreamProgress,
    event_call,
    mend,
    sealed,
    start_input,
)
from actionspace.parse._result import Collector, Malformed, ParseResult, dumped_event
from actionspace.parse._slots import Slots
from actionspace.parse._structured import (
    CUT_OFF_FINISH_REASONS,
    CUT_OFF_STATUSES,
    CUT_OFF_STOP_REASONS,
    cut_off_fault,
    responses_stop,
)
from actionspace.parse._text import REASONING_CLOSERS, REASONING_MARKS, begun_call, parse_text, prompt_opened
from actionspace.parse._text_ids import text_call_ids
from actionspace.types import ToolCall

__all__ = ["StreamParser", "StreamProgress"]

_RESPONSE_ENDS = frozenset({"response.completed", "response.incomplete", "response.failed", "response.done"})
_CUT_REASONS = CUT_OFF_FINISH_REASONS | CUT_OFF_STOP_REASONS | CUT_OFF_STATUSES | {"cut_off"}
"""Finish reasons a server gives beside a raw text stream that say it was stopped before its end (and
``cut_off``, for a caller that knows the output was cut some other way)."""
_NO_END = ("the stream ended without its finish signal", "$")
SEAL_BUDGET = 16
"""How many times its length a raw text past 8 KiB may be re-read at deltas that close a call."""


class StreamParser:
    """Feed deltas with :meth:`feed`; read the whole result with :meth:`finish`.

    ``tools`` types text-valued arguments by schema, as for :func:`parse`. ``in_reasoning`` says
    whether the prompt ended inside a reasoning block it opened (a template ending with
    ``<think>``), whose text up to its orphan closer (``</think>``) is reasoning, not calls. True:
    :meth:`feed` reports no call of raw text before a reasoning closer arrived, and an output that
    never writes one is reasoning to its end (:meth:`finish`, :meth:`output` and :meth:`call_ids`
    read it behind ``<think>``: no call, ``unterminated_reasoning``). False: it did not,
    calls are reported as soon as complete. None (not known): a call is reported once no closer
    still to come could make it reasoning, that is once the text holds a reasoning tag (an
    opener or a closer); until then it is only shown (``progress().provisional``) and
    :meth:`finish` has it. Mixing raw text and provider events in one stream raises ``TypeError``
    (a misuse).
    """

    def __init__(
        self, tools: Sequence[Mapping[str, Any]] | None = None, *, in_reasoning: bool | None = None
    ) -> None:
        self._tools = tools
        self._in_reasoning = in_reasoning
        self._settled = in_reasoning is False
        """Whether no reasoning closer still to come can make the raw text read so far reasoning."""
        self._mode: str | None = None
        self._chunks: list[str] = []
        self._events: list[Mapping[str, Any]] = []
        """Every provider event fed, in order: the output :meth:`output` hands over whole."""
        self._size = 0
        self._parsed_size = 0
        self._sealed_work = 0
        """Characters re-read past 8 KiB because a delta closed a call: at most ``SEAL_BUDGET``
        times the text, so a stream of many small calls is read in linear time, not calls × text."""
        self._reported: list[ToolCall] = []
        self._reported_ids: set[str] = set()
        """The call ids of the calls reported from provider events."""
        self._provisional: tuple[ToolCall, ...] = ()
        self._slots = Slots()
        """The calls being assembled from provider events (parse/_slots.py)."""
        self._foreign: set[int] = set()
        """Anthropic blocks that are no call of the client's (a server tool's ``server_tool_use`` or
        ``mcp_tool_use``, text…), by index: their ``input_json_delta`` is the provider's own."""
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._refusal: list[str] = []
        self._cut: tuple[str, str] | None = None
        """Why and where the provider said the output was cut off, once it did."""
        self._ended = False
        """Whether the events held the stream's finish signal (``finish_reason``, ``message_stop``…)."""
        self._stop: str | None = None
        """The provider's stop reason, once given (``ParseResult.stop_reason``)."""
        self._arg_chars = 0
        self._invalid: Malformed | None = None
        """A chat delta's ``tool_calls`` that is not a list of objects: the stream's fault."""

    # -- public ---------------------------------------------------------------------------------

    def feed(self, delta: str | Mapping[str, Any]) -> list[ToolCall]:
        """Take one delta; return the calls it completed (possibly none), to show: a finish signal
        still to come may say the output was cut off and void them. Act on :meth:`output` once the
        stream ended."""
        if isinstance(delta, str):
            self._enter("text")
            return self._feed_text(delta)
        if not isinstance(delta, str | Mapping) and callable(getattr(delta, "model_dump", None)):
            delta = dumped_event(delta) or delta  # an SDK's event object (a google-genai chunk…)
        if isinstance(delta, Mapping):
            self._enter("events")
            self._events.append(delta)
            self._feed_event(delta)
            return self._report_events()
        raise TypeError(f"a delta is raw text or a provider event mapping, not {type(delta).__name__}")

    def end(self, reason: str | None) -> None:
        """The finish reason a server sent apart from a raw text stream (a completions
        ``finish_reason``, a ``stop_reason``, a ``status``). ``length``, ``max_tokens``,
        ``model_context_window_exceeded``, ``incomplete`` (or ``cut_off``) say the token limit cut
        the output off: :meth:`finish` and :meth:`output` then keep none of its calls (``cut_off``),
        however whole they look, and text stopping inside a call's opening marker (``…<tool_ca``)
        or in the head of a call written without one (``{"na``, ``[get_weather``) is ``cut_off``
        too, not an answer. Any other reason (or None) changes nothing but the result's
        ``stop_reason`` (which ``reason`` is, as :meth:`finish` gives it). Provider
        events carry their own finish signal, to :meth:`feed` as it came: ``TypeError`` for a
        stream of events."""
        self._enter("text")
        self._stopped(reason)
        if isinstance(reason, str) and reason in _CUT_REASONS:
            self._cut_off(f"finish reason {reason!r}", "$")

    def output(self) -> str | list[Mapping[str, Any]]:
        """The whole output fed so far, as :func:`parse`, ``call_ids`` and ``Session.handle`` read
        it: the events fed (a new list), or the raw text. Raw text that :meth:`end` said was cut
        off is a chat stream chunk holding that text with ``finish_reason: "length"`` (a list of
        one), so that a session runs none of its calls. What to act on once the stream ended."""
        if self._mode == "events":
            return list(self._events)
        text = self._whole()
        if self._cut is None:
            return text
        choice = {"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": "length"}
        return [{"object": "chat.completion.chunk", "choices": [choice]}]

    def call_ids(self) -> tuple[str, ...]:
        """The call ids of the output fed so far, in its order, each once: of the provider events'
        calls, or, when they hold none, of the calls their text (or the raw text) writes with ids
        (Kimi K2 ``functions.NAME:INDEX``, Mistral ``[CALL_ID]``, a JSON call's ``"id"``)."""
        ids = (self._slots.pending[key].call_id for key in self._slots.in_message_order())
        if self._slots.order:
            return tuple(dict.fromkeys(i for i in ids if i))
        if self._mode == "events":
            return text_call_ids("".join(self._text), strict=False)
        return text_call_ids(self._whole())

    def progress(self) -> StreamProgress:
        """Calls complete so far and calls still being written."""
        if self._mode == "events":
            provisional = tuple(
                p.provisional()
                for key in self._slots.order
                if not (p := self._slots.pending[key]).done and p.name
            )
            return StreamProgress(calls=tuple(self._reported), provisional=provisional, chars=self._arg_chars)
        return StreamProgress(calls=tuple(self._reported), provisional=self._provisional, chars=self._size)

    def finish(self) -> ParseResult:
        """The result of the whole output: what :func:`parse` gives for it (for :meth:`output`, once
        :meth:`end` said it was cut), never raising."""
        from actionspace.parse import parse

        if self._mode == "events":
            return self._events_result()
        text = self._whole()
        read = (
            parse(text, tools=self._tools) if self._cut is None else cut_text(text, self._tools, *self._cut)
        )
        return read if self._stop is None else dataclasses.replace(read, stop_reason=self._stop)

    # -- raw text ---------------------------------------------------------------------------------

    def _whole(self) -> str:
        """The raw text, after the reasoning opener the prompt ended with when ``in_reasoning``."""
        text = "".join(self._chunks)
        return prompt_opened(text) if self._in_reasoning else text

    def _enter(self, mode: str) -> None:
        if self._mode is None:
            self._mode = mode
        elif self._mode != mode:
            raise TypeError("a stream carries raw text or provider events, not both")

    def _feed_text(self, delta: str) -> list[ToolCall]:
        delta = mend(self._chunks, delta)
        self._chunks.append(delta)
        self._size += len(delta)
        if not delta or CLOSING_CHARS.isdisjoint(delta):
            return []
        grown = self._size - self._parsed_size
        if self._size > EAGER_LIMIT and grown * 8 < self._parsed_size:
            if self._sealed_work + self._size > SEAL_BUDGET * self._size or not sealed(self._chunks):
                return []  # its calls are reported at a later re-read (or by finish)
            self._sealed_work += self._size
        return self._reparse()

    def _reparse(self) -> list[ToolCall]:
        from actionspace.parse import parse

        text = "".join(self._chunks)
        self._chunks = [text]
        self._parsed_size = len(text)
        calls = parse(text, tools=self._tools).calls
        complete = len(calls) if sealed(self._chunks) else len(calls) - 1
        fresh: list[ToolCall] = []
        for i in range(len(self._reported), max(complete, 0)):
            fresh.append(calls[i])
        if any(calls[i] != call for i, call in enumerate(self._reported[: len(calls)])):
            fresh = []  # the text no longer reads as it did: wait for more before reporting
        if self._in_reasoning and not any(closer in text for closer in REASONING_CLOSERS):
            fresh, calls = [], ()  # a closer still to come would make all of it reasoning
        elif not self._settled:
            # a tag settles it: after an opener no closer is an orphan, and the first closer is the one
            self._settled = any(mark in text for mark in REASONING_MARKS)
            if not self._settled:
                fresh = []  # shown as provisional: an orphan closer may yet make them reasoning
        self._reported.extend(fresh)
        self._provisional = tuple(calls[len(self._reported) :])
        return fresh

    # -- provider events --------------------------------------------------------------------------

    def _feed_event(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        if isinstance(kind, str) and kind.startswith("response."):
            self._responses_event(kind, event)
        elif isinstance(kind, str) and kind.startswith(("content_block_", "message_")):
            self._anthropic_event(kind, event)
        elif is_chunk(event):
            stream_chunk(self, event)
        else:
            self._chat_chunk(event)

    def _chat_chunk(self, chunk: Mapping[str, Any]) -> None:
        delta: Any = chunk
        finished = False
        choices = chunk.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
            choice = self._slots.chosen(choices)
            if choice is None:  # another candidate's chunk (``n`` > 1): none of the message's
                return
            delta = choice.get("delta") or {}
            reason = choice.get("finish_reason")
            self._stopped(reason)
            finished = reason is not None
            self._ended = self._ended or finished
            if isinstance(reason, str) and reason in CUT_OFF_FINISH_REASONS:
                self._cut_off(f"finish_reason {reason!r}", "$.choices[0].finish_reason")
        if not isinstance(delta, Mapping):
            return
        self._add_text(delta.get("content"))
        if isinstance(delta.get("refusal"), str):
            self._refusal.append(delta["refusal"])
        for key in ("reasoning_content", "reasoning"):
            if isinstance(delta.get(key), str):
                self._reasoning.append(delta[key])
        entries = delta.get("tool_calls")
        if entries is not None and (
            not isinstance(entries, list) or not all(isinstance(e, Mapping) for e in entries)
        ):  # TGI 2.x streamed one object: a fault, as in a whole message, never a call dropped unseen
            self._invalid = self._invalid or Malformed(
                "invalid_tool_calls", "$.choices[0].delta.tool_calls is not a list of objects", path="$"
            )
            return
        for entry in entries or ():
            index = entry.get("index", 0)
            index = index if isinstance(index, int) else 0
            function = entry.get("function")
            custom = entry.get("custom")
            slot = self._slots.chat(index, entry.get("id"), custom or function)
            if isinstance(custom, Mapping):  # a custom (free-form) tool: its input is plain text
                slot.free_text = True
                if isinstance(custom.get("name"), str):
                    slot.add_name(custom["name"])
                self._add_arguments(slot, custom.get("input"))
            elif isinstance(function, Mapping):
                if isinstance(function.get("name"), str):
                    slot.add_name(function["name"])
                self._add_arguments(slot, function.get("arguments"))
        if finished and self._cut is None:  # a cut output completes none of its calls
            for pending in self._slots.pending.values():
                pending.done = True

    def _responses_event(self, kind: str, event: Mapping[str, Any]) -> None:
        index = event.get("output_index", 0)
        index = index if isinstance(index, int) else 0
        item = event.get("item")
        if kind == "response.output_text.delta":
            self._add_text(event.get("delta"))
        elif kind == "response.refusal.delta" and isinstance(event.get("delta"), str):
            self._refusal.append(event["delta"])
        elif kind in _RESPONSE_ENDS:
            self._ended = True
            response = event.get("response")
            status = response.get("status") if isinstance(response, Mapping) else None
            if isinstance(response, Mapping):
                self._stopped(responses_stop(response, status))
            if kind == "response.incomplete" or (isinstance(status, str) and status in CUT_OFF_STATUSES):
                self._cut_off(f"status {status or 'incomplete'!r}", "$.response.status")
        elif kind in ("response.output_item.added", "response.output_item.done") and isinstance(
            item, Mapping
        ):
            if item.get("type") not in ("function_call", "custom_tool_call"):
                return
            slot = self._slots.item(index, item.get("id"))
            slot.free_text = item.get("type") == "custom_tool_call"
            slot.name = str(item.get("name") or slot.name)
            call_id = item.get("call_id", item.get("id"))
            slot.call_id = call_id if isinstance(call_id, str) else slot.call_id
            status = item.get("status")
            if kind.endswith(".done") and isinstance(status, str) and status in CUT_OFF_STATUSES:
                self._cut_off(f"status {status!r}", f"$.output[{index}].status")  # no call
            elif kind.endswith(".done"):
                slot.whole, slot.done = item.get("input" if slot.free_text else "arguments"), True
        elif kind in ("response.function_call_arguments.delta", "response.custom_tool_call_input.delta"):
            self._add_arguments(self._slots.item(index, event.get("item_id")), event.get("delta"))
        elif kind in ("response.function_call_arguments.done", "response.custom_tool_call_input.done"):
            slot = self._slots.item(index, event.get("item_id"))
            slot.whole = event.get("input" if kind.startswith("response.custom") else "arguments")
            slot.done = True

    def _anthropic_event(self, kind: str, event: Mapping[str, Any]) -> None:
        index = event.get("index", 0)
        index = index if isinstance(index, int) else 0
        if kind == "content_block_start":
            block = event.get("content_block")
            if isinstance(block, Mapping) and block.get("type") == "tool_use":
                slot = self._slots.slot("anthropic", index)
                slot.name = str(block.get("name") or "")
                slot.call_id = block.get("id") if isinstance(block.get("id"), str) else None
                slot.start = start_input(block.get("input"))
            elif isinstance(block, Mapping):
                self._foreign.add(index)
                self._add_text(block.get("text"))
        elif kind == "content_block_delta":
            delta = event.get("delta")
            if not isinstance(delta, Mapping):
                return
            if delta.get("type") == "input_json_delta" and index not in self._foreign:
                self._add_arguments(self._slots.slot("anthropic", index), delta.get("partial_json"))
            elif delta.get("type") == "text_delta":
                self._add_text(delta.get("text"))
            elif delta.get("type") == "thinking_delta" and isinstance(delta.get("thinking"), str):
                self._reasoning.append(delta["thinking"])
        elif kind == "content_block_stop" and ("anthropic", index) in self._slots.pending:
            self._slots.pending[("anthropic", index)].done = self._cut is None
        elif kind == "message_stop":
            self._ended = True
        elif kind == "message_delta":
            delta = event.get("delta")
            stop = delta.get("stop_reason") if isinstance(delta, Mapping) else None
            self._ended = self._ended or stop is not None
            self._stopped(stop)
            if isinstance(stop, str) and stop in CUT_OFF_STOP_REASONS:
                self._cut_off(f"stop_reason {stop!r}", "$.delta.stop_reason")

    def _stopped(self, reason: object) -> None:
        if self._stop is None and isinstance(reason, str) and reason:
            self._stop = str(reason)

    def _cut_off(self, why: str, path: str) -> None:
        if self._cut is None:
            self._cut = (why, path)

    def _add_text(self, text: object) -> None:
        if isinstance(text, str):
            self._text.append(mend(self._text, text))

    def _add_arguments(self, slot: Pending, piece: object) -> None:
        if isinstance(piece, str):
            self._arg_chars += slot.add(piece)

    def _report_events(self) -> list[ToolCall]:
        fresh: list[ToolCall] = []
        if self._invalid is not None:  # the message fails whole: none of its calls is shown
            return fresh
        for key in self._slots.order[len(self._reported) :]:
            pending = self._slots.pending[key]
            if not pending.done:
                break
            try:
                call = event_call(pending, f"$.{key[0]}[{key[1]}]")
            except Malformed:
                break  # reported by finish() as a parse_error
            if call.id:
                if call.id in self._reported_ids:
                    break  # an id an earlier call holds: finish() reports it as a parse_error
                self._reported_ids.add(call.id)
            fresh.append(call)
        self._reported.extend(fresh)
        return fresh

    def _events_result(self) -> ParseResult:
        coll = Collector(self._tools)
        coll.stopped(self._stop)
        if self._reasoning:
            coll.add_reasoning("".join(self._reasoning))
        text = "".join(self._text)
        try:
            if self._invalid is not None:
                coll.note("stream")
                raise self._invalid
            if self._slots.order:
                coll.note("stream")
                coll.add_content(text)
                coll.add_refusal("".join(self._refusal))
                if self._cut is not None:  # any call may hold less than the model meant to send
                    raise cut_off_fault(*self._cut, ids=self.call_ids())
                # feed() reported a prefix of the calls in arrival order, the message reads in its own
                arrived = {key: n for n, key in enumerate(self._slots.order)}
                for key in self._slots.in_message_order():
                    path = f"$.{key[0]}[{key[1]}]"
                    call = event_call(self._slots.pending[key], path)
                    index = arrived[key]
                    if index < len(self._reported) and call != self._reported[index]:
                        raise Malformed(
                            "changed_after_complete",
                            f"{path}: more of this call arrived after it was complete",
                            path=path,
                        )
                    coll.add_call(call)
                if not self._ended:  # the connection dropped: its lost end may have said the limit cut it
                    raise cut_off_fault(*_NO_END)
            else:
                parse_text(text, coll, strict=False, path="$")
                coll.add_refusal("".join(self._refusal))
                cut = self._cut or (None if self._ended else _NO_END)
                if cut is not None and (coll.calls or (self._cut and coll.error)):  # calls written as text
                    coll.error = None  # the cut says more than where the text stops
                    raise cut_off_fault(*cut, ids=text_call_ids(text, strict=False))
                begun = begun_call(text, *cut) if cut and coll.error is None else None
                if begun is not None:  # no call, but the text stops as one began
                    raise begun
        except Malformed as fault:
            coll.fail(name_calls(fault, self._events), "stream")
        except (TypeError, ValueError, json.JSONDecodeError) as exc:  # defensive: never raise
            coll.fail(
                Malformed("internal", f"stream could not be assembled ({type(exc).__name__})"), "stream"
            )
        return coll.result()
