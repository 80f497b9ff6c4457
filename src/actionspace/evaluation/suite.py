"""Evaluation suites: tasks with a request, offered tools, initial state and expected outcome.

A :class:`Suite` is a named, versioned list of :class:`Task`. Its JSON form (``to_json`` /
``from_json`` / :func:`load`) is documented in ``docs/evaluation-suites.md``; the loaders are
:func:`bfcl_suite` (every BFCL category of the pinned wheel that has tasks) and :func:`demo_suite`
(the built-in demo scenarios).

Ground truth follows BFCL's "possible answer" shape: a task lists, per turn, the calls an acceptable
answer makes, each ``{"name", "arguments": {argument: [acceptable values…]}}``; ``""`` among the
values means the argument may be left out. A final-state predicate is named, not serialized: the
callable is registered with :func:`register_predicate` and looked up with :func:`get_predicate`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from actionspace.errors import SuiteError
from actionspace.evaluation.outcomes import CATEGORIES, Category

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "ExpectedCall",
    "Predicate",
    "Request",
    "Suite",
    "SuiteError",
    "Task",
    "bfcl_suite",
    "demo_suite",
    "get_predicate",
    "load",
    "register_predicate",
]

FORMAT: Final = "actionspace.suite"
FORMAT_VERSION: Final = 2
"""Bumped when a reader of the previous version would misread a file; readers refuse newer ones."""

Message = Mapping[str, Any]
"""One chat message: ``{"role": "system" | "user" | …, "content": …}``."""
Request = str | tuple[tuple[Message, ...], ...]
"""A single user text, or turns of chat messages (a turn may be empty: nothing new is said)."""
Predicate = Callable[["Task", Any], bool]
"""``(task, final_state) -> bool``; ``final_state`` is whatever the task's executable backend exposes."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpectedCall:
    """One call an acceptable answer makes: a tool name and, per argument, every acceptable value."""

    name: str
    arguments: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    """Argument → acceptable values; ``""`` among them means the argument may be omitted."""

    def __post_init__(self) -> None:
        args = {}
        for arg, values in self.arguments.items():
            if not isinstance(values, (list, tuple)):
                raise SuiteError(f"{self.name}.{arg}: acceptable values must be a list, got {values!r}")
            args[str(arg)] = tuple(values)
        object.__setattr__(self, "arguments", args)

    def possible_answer(self) -> dict[str, dict[str, list[Any]]]:
        """BFCL's shape, ``{name: {argument: [values…]}}``, as the judge reads it."""
        return {self.name: {arg: list(values) for arg, values in self.arguments.items()}}

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": {a: list(v) for a, v in self.arguments.items()}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ExpectedCall:
        return cls(name=str(data["name"]), arguments=dict(data.get("arguments") or {}))


@dataclass(frozen=True, slots=True, kw_only=True)
class Task:
    """One evaluated task.

    ``expected`` has one entry per turn (an empty turn: calling nothing is right there); an empty
    ``expected`` with ``no_call`` false means the source ships no ground truth beyond "some call is
    expected" (BFCL's ``live_relevance``). ``no_call`` marks a negative task where any call is wrong.
    """

    id: str
    category: Category = "normal"
    """One of :data:`~actionspace.evaluation.outcomes.CATEGORIES`."""
    request: Request
    tools: tuple[Mapping[str, Any], ...] = ()
    """Offered tools: ``{"name", "description", "parameters"}`` with ``parameters`` a JSON Schema."""
    initial_state: Mapping[str, Any] = field(default_factory=dict)
    """JSON state an executable backend starts from (empty: none needed)."""
    scopes: tuple[str, ...] = ("*",)
    """The principal's scopes; default ``("*")``: everything allowed."""
    expected: tuple[tuple[ExpectedCall, ...], ...] = ()
    no_call: bool = False
    predicate: str | None = None
    """Name of a registered final-state :data:`Predicate`; None: no final-state check."""
    answers: tuple[str, ...] = ()
    """Acceptable final answers: the reply's text must contain one of them (case, spacing and
    ``,./-_*^()`` ignored; whole words). Tools are optional in such a task: any offered tool may be
    called. Empty: no answer check."""
    held_back: Mapping[int, tuple[str, ...]] = field(default_factory=dict)
    """Turn index → tools of ``tools`` first offered at that turn (absent before it)."""
    origin: str = ""
    """Where the task comes from, e.g. ``"bfcl:multi_turn_miss_func"`` or ``"demo:calendar"``."""
    notes: tuple[str, ...] = ()
    """Repairs applied to the source data when loading, one sentence each."""

    def __post_init__(self) -> None:
        if self.category not in CATEGORIES:
            raise SuiteError(f"{self.id}: unknown category {self.category!r}; known: {', '.join(CATEGORIES)}")
        if not isinstance(self.request, str):
            turns = tuple(tuple(dict(m) for m in turn) for turn in self.request)
            object.__setattr__(self, "request", turns)
        object.__setattr__(self, "tools", tuple(dict(t) for t in self.tools))
        object.__setattr__(self, "scopes", tuple(self.scopes))
        object.__setattr__(self, "expected", tuple(tuple(turn) for turn in self.expected))
        object.__setattr__(self, "notes", tuple(self.notes))
        object.__setattr__(self, "answers", tuple(str(a) for a in self.answers))
        held = {int(k): tuple(v) for k, v in self.held_back.items()}
        object.__setattr__(self, "held_back", held)
        names = [str(t.get("name")) for t in self.tools]
        if len(set(names)) != len(names):
            raise SuiteError(f"{self.id}: tool names are not unique: {names}")
        unknown = sorted({n for ns in held.values() for n in ns} - set(names))
        if unknown:
            raise SuiteError(f"{self.id}: held-back tools {unknown} are not among the tools")
        if self.no_call and any(self.expected):
            raise SuiteError(f"{self.id}: a no-call task cannot expect calls")
        if self.expected and not isinstance(self.request, str) and len(self.expected) != len(self.request):
            raise SuiteError(f"{self.id}: {len(self.request)} turns but {len(self.expected)} expected turns")

    @property
    def turns(self) -> int:
        """Number of user turns (1 for a text request)."""
        return 1 if isinstance(self.request, str) else len(self.request)

    @property
    def has_ground_truth(self) -> bool:
        """The task says which calls are right (or that none is)."""
        return self.no_call or bool(self.expected)

    def messages(self, turn: int = 0) -> tuple[Message, ...]:
        """The chat messages of ``turn`` (a text request is one user message)."""
        if isinstance(self.request, str):
            return ({"role": "user", "content": self.request},) if turn == 0 else ()
        return self.request[turn]

    def offered(self, turn: int = 0) -> tuple[Mapping[str, Any], ...]:
        """The tools offered at ``turn``: all of ``tools`` but those held back until a later turn."""
        hidden = {n for at, names in self.held_back.items() if at > turn for n in names}
        return tuple(t for t in self.tools if t.get("name") not in hidden)

    def possible_answers(self, turn: int = 0) -> list[dict[str, dict[str, list[Any]]]]:
        """The expected calls of ``turn`` in BFCL's shape (empty: no call is right, or none is known)."""
        if not self.expected:
            return []
        return [call.possible_answer() for call in self.expected[turn]]

    def negative_turns(self) -> tuple[int, ...]:
        """Turns where calling nothing is right (every turn of a no-call task)."""
        if self.no_call:
            return tuple(range(self.turns))
        return tuple(i for i, turn in enumerate(self.expected) if not turn)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "category": self.category,
            "origin": self.origin,
            "request": self.request
            if isinstance(self.request, str)
            else [[dict(m) for m in turn] for turn in self.request],
            "tools": [dict(t) for t in self.tools],
            "initial_state": dict(self.initial_state),
            "scopes": list(self.scopes),
            "expected": [[c.to_dict() for c in turn] for turn in self.expected],
            "no_call": self.no_call,
            "predicate": self.predicate,
            "answers": list(self.answers),
            "held_back": {str(k): list(v) for k, v in sorted(self.held_back.items())},
            "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Task:
        try:
            request = data["request"]
            return cls(
                id=str(data["id"]),
                category=data.get("category", "normal"),
                origin=str(data.get("origin", "")),
                request=request if isinstance(request, str) else tuple(tuple(t) for t in request),
                tools=tuple(data.get("tools", ())),
                initial_state=dict(data.get("initial_state") or {}),
                scopes=tuple(data.get("scopes", ("*",))),
                expected=tuple(
                    tuple(ExpectedCall.from_dict(c) for c in turn) for turn in data.get("expected", ())
                ),
                no_call=bool(data.get("no_call", False)),
                predicate=data.get("predicate"),
                answers=tuple(data.get("answers", ())),
                held_back={int(k): tuple(v) for k, v in (data.get("held_back") or {}).items()},
                notes=tuple(data.get("notes", ())),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise SuiteError(f"task {data.get('id', '?')!r} is malformed: {exc!r}") from exc


@dataclass(frozen=True, slots=True, kw_only=True)
class Suite:
    """A named, versioned list of tasks with unique ids."""

    name: str
    tasks: tuple[Task, ...]
    source: str = ""
    """Where the tasks come from (a package and its licence, a URL…)."""
    version: str = ""
    """The version of the source data (e.g. the BFCL release)."""

    _index: dict[str, Task] = field(init=False, repr=False, compare=False, default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tasks", tuple(self.tasks))
        index: dict[str, Task] = {}
        for task in self.tasks:
            if task.id in index:
                raise SuiteError(f"suite {self.name!r}: task id {task.id!r} appears twice")
            index[task.id] = task
        object.__setattr__(self, "_index", index)

    def __len__(self) -> int:
        return len(self.tasks)

    def __iter__(self) -> Iterator[Task]:
        return iter(self.tasks)

    def task(self, task_id: str) -> Task:
        """The task with ``task_id``; raises KeyError."""
        return self._index[task_id]

    def select(
        self, *, origins: Iterable[str] | None = None, categories: Iterable[str] | None = None
    ) -> Suite:
        """The tasks whose origin and category are among the given ones (None: any)."""
        wanted_o = None if origins is None else set(origins)
        wanted_c = None if categories is None else set(categories)
        tasks = tuple(
            t
            for t in self.tasks
            if (wanted_o is None or t.origin in wanted_o) and (wanted_c is None or t.category in wanted_c)
        )
        return Suite(name=self.name, tasks=tasks, source=self.source, version=self.version)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "name": self.name,
            "source": self.source,
            "version": self.version,
            "tasks": [t.to_dict() for t in self.tasks],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Suite:
        if data.get("format") != FORMAT:
            raise SuiteError(f"not an actionspace suite (format {data.get('format')!r})")
        version = data.get("format_version")
        if not isinstance(version, int) or not 1 <= version <= FORMAT_VERSION:
            raise SuiteError(f"suite format version {version!r} is not readable (max {FORMAT_VERSION})")
        tasks = data.get("tasks")
        if not isinstance(tasks, list):
            raise SuiteError("a suite's tasks must be a list")
        return cls(
            name=str(data.get("name", "")),
            tasks=tuple(Task.from_dict(t) for t in tasks),
            source=str(data.get("source", "")),
            version=str(data.get("version", "")),
        )

    def to_json(self, *, indent: int | None = None) -> str:
        """The documented JSON form; ``indent`` as in :func:`json.dumps` (default: compact)."""
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> Suite:
        """Read the JSON form; raises SuiteError when it is not a readable suite."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SuiteError(f"a suite file must be JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise SuiteError("a suite file must hold a JSON object")
        return cls.from_dict(data)

    def save(self, path: Path | str) -> Path:
        """Write the JSON form (UTF-8) to ``path`` and return it."""
        target = Path(path)
        target.write_text(self.to_json(indent=1), encoding="utf-8")
        return target


def load(path: Path | str) -> Suite:
    """Read a suite file written by :meth:`Suite.save` (or by hand, following the format)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise SuiteError(f"cannot read suite {path}: {exc}") from exc
    return Suite.from_json(text)


_PREDICATES: dict[str, Predicate] = {}


def register_predicate(name: str) -> Callable[[Predicate], Predicate]:
    """Decorator: make a final-state predicate known by ``name`` (a task's ``predicate``).

    Raises SuiteError when another callable already holds the name.
    """

    def register(fn: Predicate) -> Predicate:
        current = _PREDICATES.get(name)
        if current is not None and current is not fn:
            raise SuiteError(f"predicate {name!r} is already registered")
        _PREDICATES[name] = fn
        return fn

    return register


def get_predicate(name: str) -> Predicate:
    """The predicate registered as ``name``; raises SuiteError when none is.

    The demo suite's predicates are registered on first use of this function.
    """
    if name not in _PREDICATES and name.startswith("demo."):
        from actionspace.evaluation import _suite_demo  # noqa: F401  (registers the demo predicates)
    try:
        return _PREDICATES[name]
    except KeyError:
        raise SuiteError(f"no predicate registered as {name!r}") from None


def bfcl_suite(categories: Sequence[str] | None = None, *, data_dir: Path | None = None) -> Suite:
    """Every task of the given BFCL categories (default: all of them); see ``_suite_bfcl``."""
    from actionspace.evaluation._suite_bfcl import load_bfcl_suite

    return load_bfcl_suite(categories, data_dir=data_dir)


def demo_suite() -> Suite:
    """The built-in demo scenarios as tasks; see ``_suite_demo``."""
    from actionspace.evaluation._suite_demo import load_demo_suite

    return load_demo_suite()
