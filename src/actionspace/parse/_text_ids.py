"""The call ids raw model text carries, read however its calls fail.

Kimi K2 names each call by an id (``functions.NAME:INDEX``), Mistral v11+ may write one
(``NAME[CALL_ID]ID[ARGS]``), and a JSON call (Hermes, Llama ``<|python_tag|>``, bare or fenced
JSON, a Mistral list, Jamba, MiniMax-M1, Granite, InternLM2, Phi-4-mini) may hold an ``"id"``
(:mod:`~actionspace.parse._json_ids`): a provider that read such text holds one call per id, and
refuses the next request unless each is answered. A text format without ids in its text (Qwen3
XML, GLM, Llama 4, DeepSeek, harmony, Gemma, Seed-OSS, MiniMax-M2…) carries none.
"""

from __future__ import annotations

import re

from actionspace.parse._json_ids import json_call_ids
from actionspace.parse._kimi import KIMI, KIMI_ARGUMENTS
from actionspace.parse._mistral import MISTRAL_ARGS, MISTRAL_CALL_ID
from actionspace.parse._result import Collector, known_ids
from actionspace.parse._text import parse_text, visible_text

__all__ = ["text_call_ids"]

# The id of each call of a format whose markers carry ids, as its parser reads one: each pattern
# starts with a marker, so a scan stays linear however hostile the text.
_MARKED_IDS = {
    "kimi_k2": re.compile(re.escape(KIMI.call_open) + r"\s*([^\s<>]+:\d+)\s*" + re.escape(KIMI_ARGUMENTS)),
    "mistral": re.compile(re.escape(MISTRAL_CALL_ID) + r"\s*([^\s\[\]]+)\s*" + re.escape(MISTRAL_ARGS)),
}


def text_call_ids(text: str, *, strict: bool = True) -> tuple[str, ...]:
    """The call ids of the calls ``text`` holds, in its order, each once: those its parse knows
    (its calls', the call's at its fault) and, past a fault, the ids the calls' markers name
    (Kimi, Mistral) or their JSON objects hold (a provider holds those calls too). ``strict`` as for
    :func:`~actionspace.parse._text.parse_text` (a top-level string; False for message content)."""
    coll = Collector()
    parse_text(text, coll, strict=strict)
    result = coll.result()
    found = list(known_ids(result))
    if result.error is not None:
        visible = visible_text(text)
        found.extend(json_call_ids(visible, result.format))
        marked = _MARKED_IDS.get(result.format)
        if marked is not None:
            found.extend(match.group(1) for match in marked.finditer(visible))
    return tuple(dict.fromkeys(found))
