"""Evaluation policies: the model under test, seen only through what the runtime offers.

A policy receives a :class:`PolicyView` (the task, the turn, the chat so far and the offered tool
definitions) and returns a :class:`Proposal` whose ``raw`` output is handed, unchanged, to the real
pipeline (``Runtime.call`` / :func:`actionspace.parse.parse`). Three implementations:

* :class:`ScriptedPolicy` — outputs written by hand, per task id (or computed by a function).
* :class:`ReplayPolicy` — recorded outputs read from a JSONL file, one line per (task, turn).
* :class:`~actionspace.evaluation._policy_http.OpenAICompatiblePolicy` — any server speaking the
  OpenAI chat-completions protocol (vLLM, llama.cpp server, Ollama, hosted APIs).

:func:`policy_from_spec` builds one from a short command-line string.

An empty proposal (``raw == ""``) means "no call": it parses to no calls and no error.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeAlias

from actionspace.errors import ConfigurationError
from actionspace.evaluation._policy_http import OpenAICompatiblePolicy, PolicyHTTPError
from actionspace.evaluation._policy_view import Policy, PolicyView, Proposal, Raw, openai_tools

__all__ = [
    "OpenAICompatiblePolicy",
    "Policy",
    "PolicyHTTPError",
    "PolicyView",
    "Proposal",
    "Raw",
    "ReplayPolicy",
    "ScriptedPolicy",
    "openai_tools",
    "policy_from_spec",
]


def _as_proposal(value: Raw | Proposal | None) -> Proposal:
    if value is None:
        return Proposal()
    if isinstance(value, Proposal):
        return value
    return Proposal(raw=value)


def _check_raw(value: object, where: str) -> Raw:
    if isinstance(value, str | Mapping | list):
        return value
    raise ConfigurationError(
        f"{where}: a raw output must be text, an object or a list, not {type(value).__name__}"
    )


ScriptFunction: TypeAlias = Callable[[PolicyView], "Raw | Proposal | None"]


class ScriptedPolicy:
    """Outputs written in advance: per task id, the raw output of each turn in order.

    ``scripts`` maps a task id to its turns (raw outputs or :class:`Proposal` objects), or is a
    function of the view returning one (``None`` for no call). A task or turn past the end of its
    script gets the empty proposal (no call).
    """

    def __init__(
        self, scripts: Mapping[str, Sequence[Raw | Proposal]] | ScriptFunction, *, independent: bool = False
    ) -> None:
        self._function: ScriptFunction | None = None
        self._scripts: dict[str, tuple[Raw | Proposal, ...]] = {}
        self.independent = not callable(scripts) or independent
        """Answers depend on the view only, so tasks may be played in separate processes (always
        for a mapping; for a function only when it says so with ``independent=True``)."""
        if callable(scripts):
            self._function = scripts
        else:
            for task_id, turns in scripts.items():
                if isinstance(turns, str | Mapping) or not isinstance(turns, Sequence):
                    raise ConfigurationError(f"script of task {task_id!r} must be a list of turns")
                self._scripts[str(task_id)] = tuple(turns)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> ScriptedPolicy:
        """Read ``{"<task id>": [raw, raw, ...], ...}`` from a JSON file.

        Raises ConfigurationError when the file is missing, not JSON, or not of that shape.
        """
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigurationError(f"cannot read script {path}: {exc}") from exc
        if not isinstance(data, dict):
            raise ConfigurationError(f"{path}: a script is a JSON object of task id -> list of outputs")
        scripts: dict[str, list[Raw]] = {}
        for task_id, turns in data.items():
            if not isinstance(turns, list):
                raise ConfigurationError(f"{path}: script of task {task_id!r} must be a list")
            scripts[task_id] = [_check_raw(t, f"{path} task {task_id!r}") for t in turns]
        return cls(scripts)

    def propose(self, view: PolicyView) -> Proposal:
        if self._function is not None:
            return _as_proposal(self._function(view))
        turns = self._scripts.get(view.task_id, ())
        return _as_proposal(turns[view.turn]) if 0 <= view.turn < len(turns) else Proposal()


class ReplayPolicy:
    """Recorded outputs replayed by (task id, turn).

    Each JSONL line is ``{"task_id": str, "turn": int, "raw": ..., "confidence"?: float,
    "tokens"?: int}``; blank lines are skipped. A (task, turn) without a line gets the empty
    proposal (no call). Raises ConfigurationError for an unreadable file, a malformed line (its
    number is in the message) or a (task, turn) recorded twice.
    """

    independent = True
    """Answers depend on (task, turn) only: tasks may be played in separate processes."""

    def __init__(self, entries: Mapping[tuple[str, int], Proposal]) -> None:
        self._entries = dict(entries)

    def __len__(self) -> int:
        return len(self._entries)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> ReplayPolicy:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigurationError(f"cannot read replay file {path}: {exc}") from exc
        entries: dict[tuple[str, int], Proposal] = {}
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            key, proposal = _replay_line(line, where)
            if key in entries:
                raise ConfigurationError(f"{where}: task {key[0]!r} turn {key[1]} is recorded twice")
            entries[key] = proposal
        return cls(entries)

    @staticmethod
    def write(path: str | os.PathLike[str], records: Mapping[tuple[str, int], Proposal]) -> None:
        """Write ``records`` in the format :meth:`from_file` reads (the inverse of reading)."""
        lines = []
        for (task_id, turn), p in records.items():
            line: dict[str, Any] = {"task_id": task_id, "turn": turn, "raw": p.raw}
            if p.confidence is not None:
                line["confidence"] = p.confidence
            if p.tokens is not None:
                line["tokens"] = p.tokens
            lines.append(json.dumps(line, ensure_ascii=False) + "\n")
        Path(path).write_text("".join(lines), encoding="utf-8")

    def propose(self, view: PolicyView) -> Proposal:
        return self._entries.get((view.task_id, view.turn), Proposal())


def _replay_line(line: str, where: str) -> tuple[tuple[str, int], Proposal]:
    try:
        data = json.loads(line)
    except ValueError as exc:
        raise ConfigurationError(f"{where}: not JSON ({exc})") from exc
    if not isinstance(data, dict) or "task_id" not in data or "raw" not in data:
        raise ConfigurationError(f"{where}: a replay line needs task_id and raw")
    turn = data.get("turn", 0)
    confidence = data.get("confidence")
    tokens = data.get("tokens")
    if not isinstance(turn, int) or isinstance(turn, bool) or turn < 0:
        raise ConfigurationError(f"{where}: turn must be a non-negative integer")
    if confidence is not None and (
        not isinstance(confidence, int | float) or isinstance(confidence, bool) or not 0 <= confidence <= 1
    ):
        raise ConfigurationError(f"{where}: confidence must be a number in [0, 1]")
    if tokens is not None and (not isinstance(tokens, int) or isinstance(tokens, bool)):
        raise ConfigurationError(f"{where}: tokens must be an integer")
    raw = _check_raw(data["raw"], where)
    proposal = Proposal(raw=raw, confidence=None if confidence is None else float(confidence), tokens=tokens)
    return (str(data["task_id"]), turn), proposal


def policy_from_spec(spec: str, *, api_key: str | None = None) -> Policy:
    """Build a policy from ``scripted:<path.json>``, ``replay:<path.jsonl>`` or ``openai:<base_url>#<model>``
    (``openai+stream:…``: the same, streamed).

    For ``openai:`` the key is ``api_key`` when given, else the ``OPENAI_API_KEY`` environment
    variable, else none (local servers need none). Raises ConfigurationError for any other form.
    """
    kind, sep, rest = spec.partition(":")
    if not sep or not rest:
        raise ConfigurationError(f"policy spec {spec!r}: expected scripted:, replay: or openai:")
    if kind == "scripted":
        return ScriptedPolicy.from_file(rest)
    if kind == "replay":
        return ReplayPolicy.from_file(rest)
    if kind in ("openai", "openai+stream"):
        base_url, hash_sign, model = rest.rpartition("#")
        if not hash_sign or not base_url or not model:
            raise ConfigurationError(f"policy spec {spec!r}: expected {kind}:<base_url>#<model>")
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        return OpenAICompatiblePolicy(
            base_url=base_url, model=model, api_key=key or None, stream=kind == "openai+stream"
        )
    raise ConfigurationError(
        f"policy spec {spec!r}: unknown kind {kind!r} (scripted, replay, openai, openai+stream)"
    )
