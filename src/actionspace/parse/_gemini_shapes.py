"""Which mappings are Google Gemini's: a ``GenerateContentResponse``, a ``Candidate``, a ``Content``
or one ``Part``, as the REST API writes them (camelCase) or as the google-genai SDK's
``model_dump()`` gives them (snake_case, every unset field ``None``).

Only mappings without a ``type`` are asked (every other provider's blocks and items carry one),
and none that another provider's shape claims: OpenAI's legacy ``function_call`` message
(``{"name", "arguments"}``, or one with a ``role`` or ``content``) stays OpenAI's.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any, Final

__all__ = ["field", "gemini_parts", "is_chunk", "is_gemini", "word"]

_PART_KEYS: Final = frozenset(
    {
        "text",
        "thought",
        "thoughtSignature",
        "thought_signature",
        "functionCall",
        "function_call",
        "functionResponse",
        "function_response",
        "inlineData",
        "inline_data",
        "fileData",
        "file_data",
        "executableCode",
        "executable_code",
        "codeExecutionResult",
        "code_execution_result",
        "videoMetadata",
        "video_metadata",
        "mediaResolution",
        "media_resolution",
        "partMetadata",
        "part_metadata",
    }
)
"""Fields of a ``Part`` (either spelling): a mapping of nothing else that holds text is a text part."""
_OTHERS: Final = ("role", "name", "content", "type", "tool_calls", "choices", "function")


def field(value: Mapping[Any, Any], camel: str, snake: str | None = None) -> Any:
    """``value[camel]``, else ``value[snake]`` (the SDK's spelling), else None."""
    found = value.get(camel)
    return found if found is not None or snake is None else value.get(snake)


def word(value: object) -> str | None:
    """A finish or block reason as its text: a string, or the SDK enum member's value."""
    if isinstance(value, Enum):
        value = value.value
    return str.__str__(value) if isinstance(value, str) and value else None


def is_chunk(value: Mapping[Any, Any]) -> bool:
    """Whether ``value`` is a ``GenerateContentResponse`` (what each streamed chunk is too)."""
    if "type" in value or "choices" in value:
        return False
    candidates = value.get("candidates")
    if isinstance(candidates, list):
        return True
    feedback = field(value, "promptFeedback", "prompt_feedback")
    return candidates is None and isinstance(feedback, Mapping) and "name" not in value


def is_gemini(value: Mapping[Any, Any]) -> bool:
    """Whether a mapping without a ``type`` is a Gemini response, candidate, content or part."""
    if is_chunk(value):
        return True
    if isinstance(value.get("parts"), list | tuple):
        return "content" not in value and "tool_calls" not in value
    content = value.get("content")
    if isinstance(content, Mapping) and isinstance(content.get("parts"), list | tuple):
        return "role" not in value
    return _is_part(value)


def _is_part(value: Mapping[Any, Any]) -> bool:
    if any(key in value for key in _OTHERS):
        return False
    if value.get("functionCall") is not None:
        return True
    call = value.get("function_call")
    if call is not None:  # OpenAI's legacy call has ``arguments``; the SDK's ``args``
        return isinstance(call, Mapping) and "arguments" not in call
    if not isinstance(value.get("text"), str):
        return False
    return all(key in _PART_KEYS or value[key] is None for key in value)


def gemini_parts(value: Mapping[Any, Any]) -> list[Any] | tuple[Any, ...] | None:
    """The parts of the model's message in a Gemini mapping (the first candidate's), or the
    one-part list of a lone part; None when it holds none that can be read."""
    if is_chunk(value):
        candidates = value.get("candidates")
        value = candidates[0] if isinstance(candidates, list) and candidates else {}
        if not isinstance(value, Mapping):
            return None
    content = value.get("content")
    if isinstance(content, Mapping) and "parts" not in value:
        value = content
    parts = value.get("parts")
    if isinstance(parts, list | tuple):
        return parts
    return [value] if _is_part(value) else None
