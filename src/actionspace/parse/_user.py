"""The user's words as text, from the forms an app holds them in.

An app hands ``Session.user`` what its provider's SDK gave it: a string, or the message's content
as a list of parts (Chat Completions ``{"type": "text", "text": ...}``, Responses
``{"type": "input_text", ...}``, Anthropic ``{"type": "text", ...}``), or the whole user message
(``{"role": "user", "content": ...}``). The text parts, joined by newlines, are what provenance
matches arguments against; images, files and audio carry no words to match and are left out.

Only the user's words are taken: a message of another role (a tool's result, the assistant's,
the system's) would make what it says a trusted source of arguments, and content holding tool
results and no text (an Anthropic ``user`` message of ``tool_result`` blocks, a Responses
``function_call_output``) would start a turn the user never began, making an action the model
proposes again a new one. Both raise ``ConfigurationError``; tool results beside the user's
text parts are left out, as images are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from actionspace.errors import ConfigurationError

__all__ = ["user_text"]

_TEXT_PARTS: Final = frozenset({"text", "input_text"})
_RESULT_PARTS: Final = frozenset({"tool_result", "function_call_output", "mcp_tool_result"})
"""Parts that carry a tool's result back to the model: never the user's words."""


def user_text(content: Any) -> str:
    """The text of ``content`` (see the module docstring). Raises ``ConfigurationError`` for
    anything else (None, a number, bytes), before the caller changes anything."""
    if type(content) is str:
        return content
    if isinstance(content, str):
        return str(content)
    if isinstance(content, Mapping) and "content" in content:
        if "role" in content and content["role"] != "user":
            raise ConfigurationError(
                f"a message of role {content['role']!r:.40} is not the user's words (hand Session.user "
                "the user's own message; a tool's result goes back to the model, not here)"
            )
        return user_text(content["content"])
    if isinstance(content, Sequence) and not isinstance(content, bytes | bytearray):
        texts = []
        results = False
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, Mapping) and part.get("type") in _TEXT_PARTS:
                texts.append(_part_text(part))
            elif isinstance(part, Mapping) and part.get("type") in _RESULT_PARTS:
                results = True
            elif not isinstance(part, Mapping) or "type" not in part:
                why = f"a part of the user's message is not text or a typed part: {part!r:.80}"
                raise ConfigurationError(why)
        if results and not texts:
            raise ConfigurationError(
                "the message holds tool results and none of the user's words: it starts no turn "
                "(hand the results to the model only)"
            )
        return "\n".join(texts)
    raise ConfigurationError(
        "the user's words must be a string, a list of content parts or a user message, "
        f"got {type(content).__name__}"
    )


def _part_text(part: Mapping[str, Any]) -> str:
    text = part.get("text")
    if not isinstance(text, str):
        raise ConfigurationError(f"a text part of the user's message holds no text: {part!r:.80}")
    return text
