"""What the precompiled call path (pipeline/fast.py) decides once per (run, tool): the
:class:`Entry`, and the parsed call (:class:`FastCall`) that refers to it.

Besides authorization, the flow verdict and the trace payloads, an entry holds how a call's
arguments are checked (:func:`checks_of`: the compiled schema's own check when the settled forms
of its integers can be told from the top-level values' types; :func:`plain_of`: the names and
Python types that settle a flat schema without asking it) and whether an ``int`` result is put
in its envelope without the generic shaping (:func:`shapes_ints`): both depend only on the tool.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import FunctionType
from typing import Any

from actionspace.catalog.spec import ToolSpec
from actionspace.discovery.runs import RunState
from actionspace.execution.streaming import is_streaming
from actionspace.observation.rules import MIN_MAX_BYTES
from actionspace.pipeline.fast_effects import Verdict
from actionspace.pipeline.stages import Stage
from actionspace.policy.flow_policies import FlowPolicy
from actionspace.policy.labels import PUBLIC_TRUSTED, Label
from actionspace.policy.principal import Principal
from actionspace.trace.events import CallShape
from actionspace.types import ToolCall
from actionspace.validation.forms import SettledCheck
from actionspace.validation.validator import CompiledTool

__all__ = [
    "Entry",
    "FastCall",
    "Output",
    "checks_of",
    "finite_by_schema",
    "output_of",
    "plain_of",
    "positional_of",
    "shapes_ints",
    "simple_tool",
    "typed_of",
]


def positional_of(fn: Any, plain: tuple[tuple[str, type], ...] | None) -> bool:
    """Whether ``fn(*values)``, the values of ``plain``'s names in its order, binds each as
    ``fn(**arguments)`` would: ``fn`` is a plain Python function whose first parameters are those
    names in that order, none of them positional-only (a keyword would not reach one)."""
    if plain is None or type(fn) is not FunctionType:
        return False
    code = fn.__code__
    names = tuple(name for name, _ in plain)
    return (
        code.co_posonlyargcount == 0
        and code.co_argcount >= len(names)
        and code.co_varnames[: len(names)] == names
    )


def simple_tool(spec: ToolSpec, compiled: CompiledTool) -> bool:
    """No approvals, batches, streams or argument conversion: nothing to defer to."""
    return (
        not spec.requires_approval
        and spec.batch is None
        and spec.max_items is None
        and not is_streaming(spec)
        and compiled.simple
        and spec.fn is not None
        and not spec.verify
        and spec.completion is None  # post-conditions run on the staged path
    )


_NO_FLOATS = frozenset({"integer", "string", "boolean", "null"})
"""JSON Schema types no non-finite number satisfies (``integer`` refuses infinities and NaN)."""


def finite_by_schema(schema: Mapping[str, Any]) -> bool:
    """Whether ``schema`` holds every argument to a type no infinity or NaN satisfies: a closed
    object (``additionalProperties: false``, no pattern properties) each of whose properties
    names such types, with no reference whose siblings an older draft would ignore."""
    if schema.get("type") != "object" or schema.get("additionalProperties") is not False:
        return False
    if "patternProperties" in schema or "$ref" in schema:
        return False
    properties = schema.get("properties") or {}
    if not isinstance(properties, Mapping):
        return False
    for sub in properties.values():
        if not isinstance(sub, Mapping) or "$ref" in sub:
            return False
        kind = sub.get("type")
        kinds = [kind] if isinstance(kind, str) else kind
        if not isinstance(kinds, list) or not kinds or not all(k in _NO_FLOATS for k in map(str, kinds)):
            return False
    return True


Output = tuple[Label, "Label | None", tuple[str, ...]]
"""An output label, the run label it adds nothing to (None: not known to add nothing), and the
label's provenance tags (``Label.tags``, read once per run label, not once per call)."""


def output_of(label: Label, context: Label | None = None) -> Output:
    if label == PUBLIC_TRUSTED:
        return label, context, label.tags()
    within = context if context is not None and context.join(label) is context else None
    return label, within, label.tags()


@dataclass(slots=True)
class Entry:
    """What the stages decide about any simple call of one tool in one run, decided once."""

    run: RunState
    spec: ToolSpec
    compiled: CompiledTool
    principal: Principal
    policy: FlowPolicy | None
    ordered: Sequence[Stage]
    bare: Output
    """The output of a call without arguments (the tool's label)."""
    joined: tuple[Label, Output]
    """(run label, the tool's label joined with it): replaced whole, so a reader in another
    thread never pairs one run label with the output label of another."""
    shape: CallShape
    """The payloads every call's trace events share (authorized, validated, tool and version)."""
    inline: bool
    """An async tool: the first step of its coroutine is taken on the calling path."""
    effects: bool = False
    """A side-effecting tool (:func:`~actionspace.pipeline.fast_effects.has_effects`):
    :meth:`FastPath.ready` prepares its calls (the ledger runs them, pipeline/fast_effects.py);
    :meth:`FastPath.take` leaves them to the stages."""
    finite: bool = False
    """The schema alone refuses a non-finite number anywhere in the arguments
    (:func:`finite_by_schema`): a call whose schema check passed needs no walk for one."""
    verdict: Verdict | None = None
    """The flow verdict last computed for a call of a side-effecting tool, with the run label and
    argument names it holds for (replaced whole)."""
    check: Callable[[Any], bool] | None = None
    """The schema check :meth:`FastPath.take` asks first (:func:`checks_of`; None: the compiled
    tool's own ``validator.is_valid``)."""
    floats: bool = False
    """A float among the top-level argument values sends a call that ``check`` accepted to the
    compiled tool's own check as well (an integral float at an integer is not yet settled)."""
    ints: bool = False
    """An ``int`` result of a call is put in its envelope without the generic shaping
    (:func:`shapes_ints`)."""
    plain: tuple[tuple[str, type], ...] | None = None
    """Every argument's name with the one Python type that makes it valid (:func:`plain_of`): a call
    whose arguments are exactly these names, each holding a value of exactly its type, passes the
    schema and ``check`` with nothing to settle, and is not asked them (None: always asked)."""
    kept: tuple[Any, ...] | None = None
    """(the memory trace store, the number it keeps :attr:`shape` as, then its ``call_log`` of
    the run: the run's kept calls, its lock, the runs' next numbers), read once per store
    (pipeline/_direct.py)."""
    positional: bool = False
    """:attr:`plain` names the first parameters of the tool's function, a plain Python function
    with none positional-only, in their order (:func:`positional_of`): arguments taken plain are
    passed by position, which binds them as their names would."""
    typed: tuple[dict[str, type], tuple[str, ...]] | None = None
    """(each property's name with the one Python type that makes it valid, the required names)
    when the schema is an object of such properties (:func:`typed_of`): arguments whose names
    are all properties, the required ones among them, each holding a value of exactly its type
    (texts ASCII without U+0000, integers within ±(2**53 − 1)), are valid, settled and fit, and
    their canonical text is the C encoder's (pipeline/_write_admit.py). None: they
    are asked as before."""
    checked: int = -1
    """The :data:`~actionspace._epoch.EPOCH` read before pipeline/_direct.py last found this entry
    valid whole (-1: never); while the counter holds it, only what it does not cover is compared."""

    def output(self, context: Label, arguments: Mapping[str, Any]) -> Output:
        """The output label of a call with ``arguments`` while the run label is ``context``,
        ``context`` again when that label is known to add nothing to it (else None), and its tags.

        Each argument is labelled with the run label (no sources, no bindings), so it joins in
        once there is any argument.
        """
        if not arguments:
            return self.bare
        joined = self.joined
        if joined[0] is not context:
            joined = self.joined = (context, output_of(self.bare[0].join(context), context))
        return joined[1]


@dataclass(slots=True)
class FastCall:
    """One parsed call that may take the precompiled path, before any state changed."""

    entry: Entry
    name: str
    call_id: str | None
    arguments: dict[str, Any]
    raw: Any
    """The model output (recorded as ``model_output``): JSON text, a provider object, or None for a
    ToolCall."""
    fmt: str = "openai_chat"
    """The provider format ``parse`` read ``raw`` as (the ``parsed`` event's ``format``)."""

    def tool_call(self) -> ToolCall:
        return ToolCall(name=self.name, arguments=self.arguments, id=self.call_id)


def checks_of(compiled: CompiledTool) -> tuple[Callable[[Any], bool], bool]:
    """(the check a call's arguments pass first, whether a top-level float sends them on to
    ``compiled.validator``): the compiled schema's own ``is_valid`` (no Python frame of ours)
    when the settled forms of the tool's integers can be told from the values' types alone.

    :class:`~actionspace.validation.forms.SettledCheck` accepts valid arguments whose integer
    properties hold no float: when every integer is a top-level property and the schema holds no
    date-time, arguments without a float among their top-level values pass it exactly when the
    schema accepts them."""
    validator = compiled.validator
    if isinstance(validator, SettledCheck):
        quick = validator.quick()
        if quick is not None:
            return quick
    return validator.is_valid, False


def shapes_ints(spec: ToolSpec) -> bool:
    """Whether an ``int`` result of ``spec`` is shaped as its canonical text and nothing else:
    the default rule, a budget no such text can exceed, and a lifecycle that adds no notice."""
    return (
        spec.trim == "json-v1"
        and spec.max_observation_bytes >= MIN_MAX_BYTES
        and spec.lifecycle != "deprecated"
    )


_PLAIN_TYPES: dict[str, type] = {"integer": int, "string": str, "boolean": bool}
"""JSON Schema types a parsed JSON value of one exact Python type satisfies whatever its value (an
``int`` is an integer of any size; ``bool`` is not an ``int`` here, compared by ``type``)."""
_PLAIN_TOP = frozenset({"type", "properties", "required", "additionalProperties", "description", "title"})
_PLAIN_PROPERTY = frozenset({"type", "description", "title"})


def plain_of(compiled: CompiledTool) -> tuple[tuple[str, type], ...] | None:
    """The (name, Python type) of each argument when the tool's schema says no more than: a closed
    object whose properties are all required, each typed ``integer``, ``string`` or ``boolean``
    with nothing but a title or description beside it, and the tool checks nothing else (no
    defaults, no semantic checks). Arguments holding exactly those names, each of exactly its type,
    are then valid, hold no float (nothing to settle) and no non-finite number, so the precompiled
    path takes them without asking the compiled schema (a foreign function call costing more than
    this walk). None for any other schema: its calls are asked as before."""
    schema = compiled.spec.input_schema
    if not compiled.simple or compiled.defaults or not isinstance(schema, Mapping):
        return None
    if not _PLAIN_TOP.issuperset(schema) or schema.get("type") != "object":
        return None
    properties, required = schema.get("properties"), schema.get("required")
    if schema.get("additionalProperties") is not False or not isinstance(properties, Mapping):
        return None
    if not properties or not isinstance(required, list) or len(required) != len(properties):
        return None
    if not all(isinstance(r, str) for r in required) or set(required) != set(properties):
        return None
    plain: list[tuple[str, type]] = []
    for name, sub in properties.items():
        if not isinstance(name, str) or not isinstance(sub, Mapping) or not _PLAIN_PROPERTY.issuperset(sub):
            return None
        kind = sub.get("type")
        found = _PLAIN_TYPES.get(kind) if isinstance(kind, str) else None
        if found is None:
            return None
        plain.append((name, found))
    return tuple(plain)


def typed_of(compiled: CompiledTool) -> tuple[dict[str, type], tuple[str, ...]] | None:
    """(each property's Python type, the required names) when the tool's schema says no more than
    :func:`plain_of` reads, but with any properties required (the required ones among them) and
    any ``additionalProperties``, each property's name ASCII without U+0000; None for any other.

    Arguments whose names are all among the properties, each of exactly its type, are then valid
    as long as the required ones are there: no other key is present for ``additionalProperties``
    to judge, an ``integer`` holding an ``int`` needs nothing settled, and a ``string`` or
    ``boolean`` has no form to settle."""
    schema = compiled.spec.input_schema
    if not compiled.simple or compiled.defaults or not isinstance(schema, Mapping):
        return None
    if not _PLAIN_TOP.issuperset(schema) or schema.get("type") != "object":
        return None
    properties, required = schema.get("properties"), schema.get("required", [])
    if not isinstance(properties, Mapping) or not properties or not isinstance(required, list):
        return None
    if not all(type(r) is str for r in required) or not set(required) <= set(properties):
        return None
    types: dict[str, type] = {}
    for name, sub in properties.items():
        if type(name) is not str or not name.isascii() or "\x00" in name:
            return None
        if not isinstance(sub, Mapping) or not _PLAIN_PROPERTY.issuperset(sub):
            return None
        kind = sub.get("type")
        found = _PLAIN_TYPES.get(kind) if isinstance(kind, str) else None
        if found is None:
            return None
        types[name] = found
    return types, tuple(dict.fromkeys(required))
