"""Llama calls: 3.x ``<|python_tag|>`` JSON or python, and Llama 4 pythonic lists.

Llama 3.x::

    <|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}; {"name": "now", "parameters": {}}
    <|python_tag|>brave_search.call(query="weather in Paris")

Llama 4 (a Python list of keyword-argument calls, literals only)::

    <|python_start|>[get_weather(city='LA', metric='C'), register_user(name='Doe', age=9)]<|python_end|>

The same list without the wrapping tokens is read as ``pythonic`` by the text dispatcher.
"""

from __future__ import annotations

from actionspace.parse._pythonic import parse_call_list, parse_statements
from actionspace.parse._result import Collector, Malformed
from actionspace.parse._scan import iter_json_values, skip_ws
from actionspace.parse._tokens import generic_items

__all__ = ["PYTHON_START", "PYTHON_TAG", "parse_llama4", "parse_llama_python_tag"]

PYTHON_TAG = "<|python_tag|>"
PYTHON_START, PYTHON_END = "<|python_start|>", "<|python_end|>"


def parse_llama_python_tag(text: str, coll: Collector) -> None:
    """``<|python_tag|>{"name": …, "parameters": …}`` (``;``-separated for several) or a python call."""
    coll.note("llama3")
    tag = text.find(PYTHON_TAG)
    coll.add_content(text[:tag])
    body = skip_ws(text, tag + len(PYTHON_TAG))
    if text.startswith(("{", "["), body):
        rest = body
        for value, at, after in iter_json_values(text, body):
            generic_items(value, at, PYTHON_TAG, coll)
            rest = after
        coll.add_content(text[rest:])
        return
    source = text[body:].rstrip()
    if not source:
        raise Malformed("truncated", f"{PYTHON_TAG} is not followed by a call", pos=tag)
    for call in parse_statements(source, body):
        coll.add_call(call)


def parse_llama4(text: str, coll: Collector) -> None:
    """Llama 4 pythonic calls wrapped in ``<|python_start|>[…]<|python_end|>``."""
    coll.note("pythonic")
    pos = 0
    while (start := text.find(PYTHON_START, pos)) >= 0:
        coll.add_content(text[pos:start])
        body = skip_ws(text, start + len(PYTHON_START))
        close = text.find(PYTHON_END, body)
        end = len(text) if close < 0 else close
        # a list cut inside its end token (``…)]<|python_e``) is whole up to the head of the token
        head = next((n for n in range(len(PYTHON_END) - 1, 0, -1) if text.endswith(PYTHON_END[:n])), 0)
        source = text[body : end - head if close < 0 else end].rstrip()
        if not source:
            raise Malformed("truncated", f"{PYTHON_START} is not followed by a call list", pos=start)
        for call in parse_call_list(source, body):
            coll.add_call(call)
        if close < 0 and head:
            raise Malformed("truncated", f"the output stops inside {PYTHON_END!r}", pos=end - head)
        pos = end if close < 0 else close + len(PYTHON_END)
    coll.add_content(text[pos:])
