"""What a policy sees (:class:`PolicyView`) and what it answers (:class:`Proposal`)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias, runtime_checkable

from actionspace.discovery.render import openai_chat_tools

__all__ = ["Policy", "PolicyView", "Proposal", "Raw", "chat_reply", "openai_tools"]

Raw: TypeAlias = str | Mapping[str, Any] | Sequence[Any]
"""A raw model output: text, a provider message dict, or a list of either (calls concatenated)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyView:
    """Everything a policy may see before it answers one turn."""

    task_id: str
    """The suite task being played."""
    turn: int = 0
    """Zero-based index of the model turn within the task."""
    messages: tuple[Mapping[str, Any], ...] = ()
    """The chat so far in OpenAI chat format (``system`` / ``user`` / ``assistant`` / ``tool``)."""
    tools: tuple[Mapping[str, Any], ...] = ()
    """The offered tools as OpenAI tool definitions (see :func:`openai_tools`)."""
    user_turn: int | None = None
    """In a task played through a session, the zero-based user turn (``turn`` then counts every
    proposal of the task); None elsewhere."""
    step: int = 0
    """Proposals already made in this user turn (0: the first answer to the user's words)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Proposal:
    """One model turn's raw output, before any parsing."""

    raw: Raw = ""
    """Text, a provider message dict, or a list of these; ``""`` (the default) means no call."""
    confidence: float | None = None
    """Probability in [0, 1] the policy gives its tool choice; None when it cannot tell."""
    tokens: int | None = None
    """Tokens spent on this turn (prompt + completion), when known."""

    @property
    def empty(self) -> bool:
        """True for the "no call" proposal (``raw == ""``)."""
        return isinstance(self.raw, str) and self.raw == ""


@runtime_checkable
class Policy(Protocol):
    """The model: sees a :class:`PolicyView`, answers with a :class:`Proposal`."""

    def propose(self, view: PolicyView) -> Proposal: ...


def openai_tools(descriptions: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any], ...]:
    """OpenAI tool definitions for what ``Runtime.offer`` returned (``ToolSpec.describe()`` dicts).

    Each ``{"name", "description", "input_schema", ...}`` becomes
    ``{"type": "function", "function": {"name", "description", "parameters"}}``; a definition that
    already has the OpenAI shape is passed through unchanged. Nothing but the name, the description
    and the input schema reaches the model. (:func:`actionspace.discovery.openai_chat_tools`.)
    """
    return openai_chat_tools(descriptions)


def chat_reply(
    content: str | None,
    calls: Sequence[Mapping[str, Any]],
    ids: Sequence[str],
    observations: Sequence[Any],
    *,
    whole: bool = False,
) -> list[dict[str, Any]]:
    """The assistant message and one ``tool`` message per call, in OpenAI chat format.

    A tool message carries the observation's status, data and error, or (``whole``) its full dict.
    """
    assistant: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        assistant["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": c["name"], "arguments": json.dumps(c["arguments"], default=str)},
            }
            for call_id, c in zip(ids, calls, strict=True)
        ]
    out = [assistant]
    for call_id, obs in zip(ids, observations, strict=False):
        if whole:
            result = obs.to_dict()
        else:
            result = {
                "status": obs.status,
                "data": obs.data,
                "error": obs.error.to_dict() if obs.error else None,
            }
        out.append({"role": "tool", "tool_call_id": call_id, "content": json.dumps(result, default=str)})
    return out
