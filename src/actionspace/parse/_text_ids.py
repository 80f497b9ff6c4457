"""The call ids raw model text carries, read however its calls fail.

Kimi K2 names each call by an id (``functions.NAME:INDEX``), Mistral v11+ may write one
(``NAME[CALL_ID]ID[ARGS]``), and a JSON call may hold an ``"id"``: a provider that read such text
holds one call per id, and refuses the next request unless each is answered. A text format
without ids in its text (Hermes, Qwen3 XML, Llama, DeepSeek, harmony, Gemma…) carries none.
"""

from __future__ import annotations

import re

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
    (its calls', the call's at its fault) and, past a fault in a format whose markers carry ids,
    the ids the later calls' markers name (a provider holds those calls too). ``strict`` as for
    :func:`~actionspace.parse._text.parse_text` (a top-level string; False for message content)."""
    coll = Collector()
    parse_text(text, coll, strict=strict)
    result = coll.result()
    found = list(known_ids(result))
    marked = _MARKED_IDS.get(result.format)
    if result.error is not None and marked is not None:
        found.extend(match.group(1) for match in marked.finditer(visible_text(text)))
    return tuple(dict.fromkeys(found))
