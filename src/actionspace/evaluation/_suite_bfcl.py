"""BFCL (``bfcl-eval``, Apache-2.0) categories read as a :class:`~actionspace.evaluation.suite.Suite`.

The data files are read from the pinned wheel's unpacked ``data/`` folder (:mod:`._bfcl_data`);
function docs become JSON Schema with :mod:`._bfcl_schema`. Category mapping:

* ``irrelevance``, ``live_irrelevance`` → ``no_tool``, ``no_call``: no offered tool fits;
* ``multi_turn_miss_param`` → ``info_missing``: one turn lacks a fact (expected: no call there);
* ``multi_turn_miss_func`` → ``no_tool``: one turn needs a tool that is not offered yet (expected:
  no call there); not ``near_name``, since no confusable tool stands in for the missing one;
* everything else → ``normal``; ``live_relevance`` ships no possible answer (``expected`` empty:
  some call is expected, BFCL checks nothing more).

``memory`` and ``web_search`` (agentic) → ``normal`` tasks whose ground truth is a final answer
(:attr:`~actionspace.evaluation.suite.Task.answers`), with the memory (key-value) or web-search
backend's functions offered; calling them is optional. Their backends (a memory built from earlier
conversations, a live search engine) are not run: a policy that calls them gets the echo tools.

Not read: ``format_sensitivity`` (a list of prompt-format variants of other categories' tasks).
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from actionspace.errors import ToolDefinitionError
from actionspace.evaluation import _bfcl_data
from actionspace.evaluation._bfcl_mt_backends import BACKENDS
from actionspace.evaluation._bfcl_schema import to_input_schema
from actionspace.evaluation.outcomes import Category
from actionspace.evaluation.suite import ExpectedCall, Suite, SuiteError, Task

__all__ = ["BFCL_CATEGORIES", "CATEGORY_MAP", "load_bfcl_suite"]

SINGLE_TURN: Final = (
    "simple_python",
    "simple_java",
    "simple_javascript",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
)
NEGATIVE: Final = ("irrelevance", "live_irrelevance")
NO_ANSWER: Final = ("live_relevance",)
MULTI_TURN: Final = (
    "multi_turn_base",
    "multi_turn_miss_func",
    "multi_turn_miss_param",
    "multi_turn_long_context",
)
AGENTIC: Final[Mapping[str, str]] = {"memory": "memory_kv.json", "web_search": "web_search.json"}
"""Agentic categories → the function doc file of the backend offered with them."""
BFCL_CATEGORIES: Final = (*SINGLE_TURN, *NEGATIVE, *NO_ANSWER, *MULTI_TURN, *AGENTIC)
"""Every BFCL category of the pinned release that holds tasks."""

CATEGORY_MAP: Final[Mapping[str, Category]] = {
    **{c: "normal" for c in BFCL_CATEGORIES},
    "irrelevance": "no_tool",
    "live_irrelevance": "no_tool",
    "multi_turn_miss_func": "no_tool",
    "multi_turn_miss_param": "info_missing",
}

_LANGUAGE_TYPES: Final[Mapping[str, str]] = {
    "String": "string",
    "Boolean": "boolean",
    "long": "integer",
    "double": "float",
    "char": "string",
    "Array": "array",
    "ArrayList": "array",
    "HashMap": "dict",
    "": "any",
}
"""Java / JavaScript type names in ``simple_java`` and ``simple_javascript`` → BFCL's own names."""


def load_bfcl_suite(categories: Sequence[str] | None = None, *, data_dir: Path | None = None) -> Suite:
    """The tasks of ``categories`` (default :data:`BFCL_CATEGORIES`), in file order per category.

    Raises SuiteError for an unknown category, BfclDataError when the data cannot be fetched or
    its questions and answers disagree.
    """
    chosen = tuple(categories) if categories is not None else BFCL_CATEGORIES
    unknown = [c for c in chosen if c not in BFCL_CATEGORIES]
    if unknown:
        raise SuiteError(f"unknown BFCL categories {unknown}; known: {', '.join(BFCL_CATEGORIES)}")
    data = data_dir if data_dir is not None else _bfcl_data.fetch()
    tasks: list[Task] = []
    for category in chosen:
        try:
            if category in MULTI_TURN:
                tasks.extend(_multi_turn(category, data))
            elif category in AGENTIC:
                tasks.extend(_agentic(category, data))
            else:
                tasks.extend(_single_turn(category, data))
        except (KeyError, TypeError, AttributeError, IndexError, ValueError) as exc:
            # a record missing a field or holding one of another type: a hand-edited or torn cache
            raise _bfcl_data.BfclDataError(
                f"{category}: malformed BFCL record ({type(exc).__name__}: {exc}) in {data}; "
                "delete the unpacked folder to unpack the pinned wheel again"
            ) from exc
    return Suite(
        name="bfcl",
        tasks=tuple(tasks),
        source=f"bfcl-eval=={_bfcl_data.BFCL_VERSION} (Apache-2.0)",
        version=_bfcl_data.BFCL_VERSION,
    )


def _records(data: Path, category: str) -> list[dict[str, Any]]:
    return list(_bfcl_data._lines(data / f"BFCL_v4_{category}.json"))


def _answers(data: Path, category: str) -> dict[str, Any]:
    return {
        a["id"]: a["ground_truth"]
        for a in _bfcl_data._lines(data / "possible_answer" / f"BFCL_v4_{category}.json")
    }


def _single_turn(category: str, data: Path) -> list[Task]:
    answers = _answers(data, category) if category in SINGLE_TURN else {}
    language = category.removeprefix("simple_") if category in ("simple_java", "simple_javascript") else None
    tasks = []
    for raw in _records(data, category):
        notes: list[str] = []
        tools = tuple(_tool(doc, language, notes) for doc in raw["function"])
        question = tuple(tuple(turn) for turn in raw["question"])
        if category in SINGLE_TURN:
            truth = answers.pop(raw["id"], None)
            if truth is None:
                raise _bfcl_data.BfclDataError(f"{category}: {raw['id']} has no possible answer")
            expected: tuple[tuple[ExpectedCall, ...], ...] = (tuple(_expected(a) for a in truth),)
        elif category in NEGATIVE:
            expected = ((),) * len(question)
        else:
            expected = ()
        tasks.append(
            Task(
                id=raw["id"],
                category=CATEGORY_MAP[category],
                origin=f"bfcl:{category}",
                request=question,
                tools=tools,
                expected=expected,
                no_call=category in NEGATIVE,
                notes=tuple(notes),
            )
        )
    if answers:
        raise _bfcl_data.BfclDataError(
            f"{category}: possible answers without a question: {sorted(answers)[:5]}"
        )
    return tasks


def _expected(answer: Mapping[str, Any]) -> ExpectedCall:
    if len(answer) != 1:
        raise _bfcl_data.BfclDataError(f"a possible answer names one function, got {list(answer)}")
    ((name, arguments),) = answer.items()
    return ExpectedCall(name=name, arguments=arguments)


def _tool(doc: Mapping[str, Any], language: str | None, notes: list[str]) -> dict[str, Any]:
    """``{"name", "description", "parameters"}`` with the parameters as JSON Schema."""
    name = str(doc["name"])
    parameters = doc.get("parameters") or {"type": "dict"}
    if language is not None:
        parameters = _language_types(parameters)
    try:
        schema = to_input_schema(parameters, where=name)
    except ToolDefinitionError as exc:
        # BFCL's own pipeline never reads `optional`; two irrelevance docs misuse it.
        schema = to_input_schema(_without_optional(parameters), where=name)
        notes.append(f"{name}: ignored BFCL's malformed 'optional' flags ({exc})")
    return {"name": name, "description": str(doc.get("description") or ""), "parameters": schema}


def _language_types(node: Any) -> Any:
    if isinstance(node, Mapping):
        out = {k: _language_types(v) for k, v in node.items()}
        kind = out.get("type")
        if isinstance(kind, str) and kind in _LANGUAGE_TYPES:
            out["type"] = _LANGUAGE_TYPES[kind]
        if "properties" in node:
            out["properties"] = {k: _language_types(v) for k, v in node["properties"].items()}
        return out
    if isinstance(node, list):
        return [_language_types(v) for v in node]
    return node


def _without_optional(node: Any) -> Any:
    if isinstance(node, Mapping):
        return {k: _without_optional(v) for k, v in node.items() if k != "optional"}
    if isinstance(node, list):
        return [_without_optional(v) for v in node]
    return node


def _agentic(category: str, data: Path) -> list[Task]:
    answers = _answers(data, category)
    docs = _bfcl_data._lines(data / "multi_turn_func_doc" / AGENTIC[category])
    tools = tuple(_tool(doc, None, []) for doc in docs)
    tasks = []
    for raw in _records(data, category):
        truth = answers.pop(raw["id"], None)
        if not truth:
            raise _bfcl_data.BfclDataError(f"{category}: {raw['id']} has no ground-truth answer")
        tasks.append(
            Task(
                id=raw["id"],
                category=CATEGORY_MAP[category],
                origin=f"bfcl:{category}",
                request=tuple(tuple(turn) for turn in raw["question"]),
                tools=tools,
                answers=tuple(str(a) for a in truth),
            )
        )
    if answers:
        raise _bfcl_data.BfclDataError(f"{category}: answers without a question: {sorted(answers)[:5]}")
    return tasks


def _multi_turn(category: str, data: Path) -> list[Task]:
    answers = _answers(data, category)
    docs = _class_docs(data)
    converted: dict[int, dict[str, Any]] = {}
    tasks = []
    for raw in _records(data, category):
        truth = answers.pop(raw["id"], None)
        if truth is None:
            raise _bfcl_data.BfclDataError(f"{category}: {raw['id']} has no ground truth")
        excluded = set(raw.get("excluded_function") or ())
        offered: dict[str, Mapping[str, Any]] = {}
        for class_name in raw["involved_classes"]:
            offered.update({n: d for n, d in docs[class_name].items() if n not in excluded})
        held = {int(k): tuple(v) for k, v in (raw.get("missed_function") or {}).items()}
        expected = tuple(tuple(_parse_call(text, offered) for text in turn) for turn in truth)
        tasks.append(
            Task(
                id=raw["id"],
                category=CATEGORY_MAP[category],
                origin=f"bfcl:{category}",
                request=tuple(tuple(turn) for turn in raw["question"]),
                tools=tuple(_converted(converted, doc) for doc in offered.values()),
                initial_state={
                    "involved_classes": list(raw["involved_classes"]),
                    "initial_config": copy.deepcopy(raw.get("initial_config") or {}),
                    "long_context": "long_context" in category,
                },
                expected=expected,
                held_back=held,
            )
        )
    if answers:
        raise _bfcl_data.BfclDataError(f"{category}: ground truth without a question: {sorted(answers)[:5]}")
    return tasks


def _converted(done: dict[int, dict[str, Any]], doc: Mapping[str, Any]) -> dict[str, Any]:
    """``_tool(doc)``, converted once per doc object and shared by every task offering it."""
    tool = done.get(id(doc))
    if tool is None:
        tool = done[id(doc)] = _tool(doc, None, [])
    return tool


def _class_docs(data: Path) -> dict[str, dict[str, Mapping[str, Any]]]:
    """Backend class → method name → BFCL function doc."""
    out: dict[str, dict[str, Mapping[str, Any]]] = {}
    for class_name, backend in BACKENDS.items():
        lines = _bfcl_data._lines(data / "multi_turn_func_doc" / backend.doc_file)
        out[class_name] = {str(doc["name"]): doc for doc in lines}
    return out


def _parse_call(text: str, docs: Mapping[str, Mapping[str, Any]]) -> ExpectedCall:
    """``"mv(source='a', destination='b')"`` read with :mod:`ast` (literals only, never evaluated).

    Positional arguments are named in the order of the doc's ``properties``, which is the order of
    the backend method's parameters for every positional call of the pinned release.
    """
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise _bfcl_data.BfclDataError(f"ground truth {text!r} is not a call") from exc
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise _bfcl_data.BfclDataError(f"ground truth {text!r} is not a call of a plain name")
    name = node.func.id
    order = list(((docs.get(name) or {}).get("parameters") or {}).get("properties") or {})
    if len(node.args) > len(order):
        raise _bfcl_data.BfclDataError(f"ground truth {text!r}: too many positional arguments for {name}")
    try:
        arguments = {param: (ast.literal_eval(arg),) for param, arg in zip(order, node.args, strict=False)}
        for keyword in node.keywords:
            if keyword.arg is None or keyword.arg in arguments:
                raise ValueError(f"bad keyword in {text!r}")
            arguments[keyword.arg] = (ast.literal_eval(keyword.value),)
    except ValueError as exc:
        raise _bfcl_data.BfclDataError(f"ground truth {text!r}: arguments must be literals ({exc})") from exc
    return ExpectedCall(name=name, arguments=arguments)
