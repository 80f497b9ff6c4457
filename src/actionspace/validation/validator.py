"""The validate stage: JSON Schema, semantic types, refinements, bindings, provenance, business rules.

Each tool version is compiled once (:func:`compile_tool`); validating a call then costs one
compiled JSON Schema check plus whatever the tool declared beyond it.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from fnmatch import fnmatchcase
from typing import Any

import jsonschema_rs
from pydantic import ValidationError

from actionspace._json_values import TOO_COSTLY, unfit_arguments
from actionspace.catalog._by_spec import BySpec
from actionspace.catalog.functions import coercion_errors
from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ActionError, ConfigurationError, FieldError
from actionspace.validation._ref_cycles import reference_loop
from actionspace.validation.forms import ArgumentForms, SettledCheck, compile_forms
from actionspace.validation.semantic import SemanticChecks, compile_checkers
from actionspace.validation.verdicts import ACCEPTED, Accepted, NeedsApproval, Rejected, Verdict

__all__ = [
    "CompiledTool",
    "Validated",
    "ValidationContext",
    "after",
    "compile_tool",
    "identity_arguments",
    "validate",
]

_log = logging.getLogger("actionspace")

MAX_FIELD_ERRORS = 20
"""At most this many field errors are reported for one call (the rest are counted)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ValidationContext:
    """What a business validator or a binding resolver may read: who asks, in which run."""

    run_id: str
    node_id: str
    call_id: str
    principal_id: str
    scopes: tuple[str, ...]
    """The principal's scope patterns (see ``Principal.allows``)."""
    resource_version: Callable[[str, str], str | None]
    """``(kind, id) -> current version`` or None when the resource no longer exists."""
    state: Mapping[str, Any] = field(default_factory=dict)
    """The runtime's ``state`` mapping: handles to live services the validators read."""

    def allows(self, scope: str) -> bool:
        """True when the calling principal holds ``scope`` (glob patterns, as ``Principal.allows``)."""
        return any(fnmatchcase(scope, pattern) for pattern in self.scopes)


@dataclass(frozen=True, slots=True)
class CompiledTool:
    """A tool version ready for the hot path."""

    spec: ToolSpec
    validator: Any
    """What the precompiled path asks (``is_valid``): :attr:`schema`, or, when the schema holds
    integers or date-times, a :class:`~actionspace.validation.forms.SettledCheck` that also wants the
    arguments in the form the tool receives and the action is known by (any other call takes the
    stages, which convert it)."""
    checks: SemanticChecks
    defaults: tuple[tuple[str, Any], ...]
    simple: bool
    """No check beyond the JSON Schema: validation is one ``is_valid`` call."""
    accepted_event: Mapping[str, Any]
    """The trace payload of an accepted call (shared: never mutated)."""
    output_labels: tuple[str, ...]
    """The labels an observation of this tool carries."""
    schema: Any
    """The compiled JSON Schema."""
    forms: ArgumentForms | None
    """Where the schema holds integers and date-times (None: nowhere), see :meth:`ArgumentForms.split`."""


@dataclass(slots=True)
class Validated:
    """The outcome of validation: the verdict and the normalized call."""

    verdict: Verdict
    arguments: Mapping[str, Any]
    """The call as its action is known by (its idempotency key, argument digest, node, approvals,
    ledger entry and trace): with defaults written in, bound entities replaced by their ids, paths
    canonical, integers written ``7.0`` as ``7`` and date-times in one spelling
    (:func:`~actionspace.validation.forms.timestamp_identity`)."""
    provenance: Mapping[str, str]
    python_arguments: Mapping[str, Any] | None = None
    """What the tool receives when it is not :attr:`arguments`: converted for a Python tool
    (``coerce``), or date-times as the call spelled them."""


_VALIDATORS: dict[str, Any] = {}
"""Compiled JSON Schema validators by schema hash (immutable, shared by every runtime)."""


_COMPILED: BySpec[tuple[Any, ...]] = BySpec()
"""What each live spec compiled to, all but the spec (:class:`CompiledTool`'s other fields, in
order): a spec registered again, as every fresh runtime of an evaluation does with the same tools,
is not compiled again, and a spec no runtime holds any more is not kept, nor its functions."""


def compile_tool(spec: ToolSpec) -> CompiledTool:
    """Compile a spec's schema and markers. Raises ConfigurationError on an invalid schema."""
    parts = _COMPILED.get(spec)
    if parts is not None:
        return CompiledTool(spec, *parts)
    compiled = _compile(spec)
    _COMPILED.put(spec, _parts(compiled))
    return compiled


def _parts(compiled: CompiledTool) -> tuple[Any, ...]:
    return tuple(getattr(compiled, name) for name in _AFTER_SPEC)


_AFTER_SPEC = tuple(f.name for f in fields(CompiledTool))[1:]


def _compile(spec: ToolSpec) -> CompiledTool:
    validator = _VALIDATORS.get(spec.schema_hash)
    if validator is None:
        try:
            validator = jsonschema_rs.validator_for(dict(spec.input_schema), offline=True)  # fetches nothing
        except Exception as exc:
            raise ConfigurationError(f"{spec.key}: input_schema is not a valid JSON Schema: {exc}") from exc
        if len(_VALIDATORS) >= 4096:
            _VALIDATORS.clear()
        _VALIDATORS[spec.schema_hash] = validator
    loop = reference_loop(spec.input_schema)
    if loop is not None:
        raise ConfigurationError(
            f"{spec.key}: input_schema refers back to itself without stepping into the value "
            f"({' -> '.join(loop)}), so it checks nothing there: give the loop a schema of its own"
        )
    try:
        checks = compile_checkers(spec.input_schema)
    except ConfigurationError as exc:
        raise ConfigurationError(f"{spec.key}: {exc}") from exc
    defaults = _defaults(spec)
    simple = not (
        not checks.empty
        or defaults
        or spec.refinements
        or spec.validators
        or spec.bindings
        or spec.high_risk_args
        or spec.requires_approval
        or spec.coerce
    )
    accepted = {
        "verdict": "accepted",
        "tool": spec.name,
        "version": spec.version,
        "schema_hash": spec.schema_hash,
    }
    labels = (spec.labels.confidentiality,)
    forms = compile_forms(spec.input_schema)
    check = validator if forms is None else SettledCheck(validator, forms)
    return CompiledTool(spec, check, checks, defaults, simple, accepted, labels, validator, forms)


def _defaults(spec: ToolSpec) -> tuple[tuple[str, Any], ...]:
    """The top-level ``default`` values written into a call that leaves them out: those their own
    property schema accepts. A default it refuses (``{"type": "integer", "default": null}``, as
    generated servers often write) is left out, so the argument stays unset and the tool applies
    its own default: written in, the tool would receive arguments its schema refuses, which no
    model could have sent. Each one left out is logged once, here."""
    schema = spec.input_schema
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return ()
    context = {k: schema[k] for k in ("$schema", "$defs", "definitions") if k in schema}
    kept: list[tuple[str, Any]] = []
    for name, sub in props.items():
        if not isinstance(sub, Mapping) or "default" not in sub:
            continue
        try:
            fits = jsonschema_rs.validator_for({**context, **sub}, offline=True).is_valid(sub["default"])
        except Exception:  # a subschema that reads only inside its root (``$ref: "#"``): as declared
            fits = True
        if fits:
            kept.append((str(name), sub["default"]))
        else:
            _log.warning(
                "%s: the default of %r does not match its own schema; calls leaving %r out get no default",
                spec.key,
                name,
                name,
            )
    return tuple(kept)


def _reject(message: str, errors: list[FieldError], **details: Any) -> Validated:
    extra = len(errors) - MAX_FIELD_ERRORS
    if extra > 0:
        details["more_field_errors"] = extra
    error = ActionError.of(
        "invalid_arguments", message, field_errors=errors[:MAX_FIELD_ERRORS], details=details
    )
    return Validated(Rejected(error), {}, {})


def schema_errors(validator: Any, args: Any) -> list[FieldError]:
    """Every JSON Schema error as a FieldError with a JSON pointer to the offending value."""
    out: list[FieldError] = []
    for err in validator.iter_errors(args):
        pointer = "".join(f"/{str(p).replace('~', '~0').replace('/', '~1')}" for p in err.instance_path)
        kind = err.kind
        if isinstance(kind, jsonschema_rs.ValidationErrorKind.Required):
            pointer = f"{pointer}/{kind.property}"
        elif isinstance(kind, jsonschema_rs.ValidationErrorKind.AdditionalProperties):
            for name in itertools.islice(kind.unexpected, 4 * MAX_FIELD_ERRORS + 1):  # a model may send 100k
                out.append(FieldError(path=f"{pointer}/{name}", message=f"unexpected argument {name!r}"))
            continue
        out.append(FieldError(path=pointer, message=err.message[:300]))
        if len(out) > 4 * MAX_FIELD_ERRORS:
            break
    return out


def validate(
    compiled: CompiledTool, arguments: Any, provenance: Mapping[str, str], ctx: ValidationContext | None
) -> Validated:
    """Run every check of the validate stage; never raises for any ``arguments``."""
    if not isinstance(arguments, dict):
        return _reject(
            "arguments must be a JSON object",
            [FieldError(path="", message=f"expected an object, got {type(arguments).__name__}")],
        )
    unfit = unfit_arguments(arguments)
    if unfit is not None:  # before the schema: its checker cannot read such text, nor a digest such values
        path, reason, text = unfit
        summary = (
            "arguments hold text that is not Unicode"
            if text
            else "arguments are too large to write as JSON"
            if reason == TOO_COSTLY
            else "arguments hold a value that is not JSON"
        )
        return _reject(summary, [FieldError(path=path, message=reason)])
    if not compiled.schema.is_valid(arguments):
        return _reject("arguments do not match the tool's schema", schema_errors(compiled.schema, arguments))
    if compiled.simple:
        if compiled.forms is None:
            return Validated(ACCEPTED, arguments, provenance)
        received, known = compiled.forms.split(arguments)
        return Validated(ACCEPTED, known, provenance, None if received is known else received)
    return _validate_rich(compiled, arguments, dict(provenance), ctx)


def identity_arguments(compiled: CompiledTool, arguments: Any) -> Mapping[str, Any] | None:
    """The arguments a call's action is known by, as far as the tool's schema decides them: what
    :func:`validate` makes :attr:`Validated.arguments` of (defaults written in, canonical paths,
    integers and date-times in one form), or None when it refuses them at the schema already.

    For callers that count the identical calls of one model message the way the validate stage
    counts them (``Runtime.acall(..., occurrence=...)``) without running a call. Entity bindings
    and business validators read live state and are not run: arguments naming one entity in two
    ways are two actions here. Never raises for any ``arguments``.
    """
    if not isinstance(arguments, dict) or unfit_arguments(arguments) is not None:
        return None
    if not compiled.schema.is_valid(arguments):
        return None
    forms = compiled.forms
    if compiled.simple:
        return arguments if forms is None else forms.split(arguments)[1]
    args = dict(arguments)
    for name, value in compiled.defaults:
        args.setdefault(name, value)
    known: dict[str, Any] = compiled.checks.canonical(args)
    return known if forms is None else forms.split(forms.split(known)[0])[1]


def _validate_rich(
    compiled: CompiledTool,
    arguments: dict[str, Any],
    provenance: dict[str, str],
    ctx: ValidationContext | None,
) -> Validated:
    spec = compiled.spec
    args = dict(arguments)
    for name, value in compiled.defaults:
        if name not in args:
            args[name] = value
            provenance[name] = "default"
    args = compiled.checks.canonical(args)
    if compiled.forms is not None:  # what the tool receives: the checks below read that
        args = compiled.forms.split(args)[0]
    errors = [FieldError(path=p, message=m) for p, m in compiled.checks.problems(args)]
    if spec.refinements:
        # a refinement relates values that passed their own checks (a start without an offset is
        # reported at /start, not again as an end that cannot be compared with it)
        flagged = {_top(e.path) for e in errors}
        judged = {k: v for k, v in args.items() if k not in flagged} if flagged else args
        for refine in spec.refinements:
            errors.extend(refine(judged) or ())
    python_args: dict[str, Any] | None = None
    if not errors and spec.coerce is not None:
        try:
            python_args = spec.coerce(args)
        except ValidationError as exc:
            errors.extend(FieldError(path=p, message=m) for p, m in coercion_errors(exc))
    if errors:
        return _reject("arguments are not valid for this tool", errors)
    if ctx is None:
        ctx = ValidationContext(
            run_id="", node_id="", call_id="", principal_id="", scopes=(), resource_version=_no_resources
        )
    stale = _check_resources(compiled, args, ctx)
    if stale is not None:
        return Validated(Rejected(stale), {}, {})
    bound = _bind(spec, args, ctx)
    if isinstance(bound, ActionError):
        return Validated(Rejected(bound), {}, {})
    if bound is not args and python_args is not None and spec.coerce is not None:
        python_args = spec.coerce(bound)
    args = bound
    approvals: list[NeedsApproval] = []
    inferred = [
        a
        for a in spec.high_risk_args
        if a in args and provenance.get(a, "model_inferred") == "model_inferred"
    ]
    if inferred:
        approvals.append(
            NeedsApproval(
                f"high-risk argument(s) {', '.join(inferred)} were inferred by the model",
                {"arguments": inferred, "rule": "model_inferred_high_risk"},
            )
        )
    for validator in spec.validators:
        verdict = validator(ctx, args)
        if verdict is None or isinstance(verdict, Accepted):
            continue
        if isinstance(verdict, Rejected):
            return Validated(verdict, args, provenance)
        if isinstance(verdict, NeedsApproval):
            approvals.append(verdict)
            continue
        raise ConfigurationError(f"{spec.key}: validator {validator!r} returned {verdict!r}, not a Verdict")
    if spec.requires_approval:
        approvals.append(NeedsApproval(f"{spec.name} always needs approval", {"rule": "requires_approval"}))
    if approvals:
        reasons = "; ".join(a.reason for a in approvals)
        details = {"rules": [dict(a.details) for a in approvals]}
        return _known(compiled, NeedsApproval(reasons, details), args, provenance, python_args)
    return _known(compiled, ACCEPTED, args, provenance, python_args)


def _known(
    compiled: CompiledTool,
    verdict: Verdict,
    args: dict[str, Any],
    provenance: Mapping[str, str],
    python_args: dict[str, Any] | None,
) -> Validated:
    """The validated call: ``args`` (what the tool receives, unless ``python_args``) as the action
    is known by, its date-times in one spelling."""
    known = args if compiled.forms is None else compiled.forms.split(args)[1]
    if python_args is None and known is not args:
        python_args = args
    return Validated(verdict, known, provenance, python_args)


def _top(pointer: str) -> str:
    """The top-level argument a JSON pointer is in (``""`` for the arguments as a whole)."""
    head = pointer.split("/", 2)[1] if pointer.startswith("/") else ""
    return head.replace("~1", "/").replace("~0", "~")


def _no_resources(kind: str, rid: str) -> str | None:
    raise ConfigurationError(f"no resource version resolver for kind {kind!r}")


def _check_resources(
    compiled: CompiledTool, args: Mapping[str, Any], ctx: ValidationContext
) -> ActionError | None:
    for pointer, kind, ref in compiled.checks.resource_refs(args):
        rid, version = str(ref.get("id")), str(ref.get("version"))
        current = ctx.resource_version(kind, rid)
        if current == version:
            continue
        what = "no longer exists" if current is None else f"is at version {current}, not {version}"
        return ActionError.of(
            "stale_reference",
            f"{kind or 'resource'} {rid} {what}; observe it again",
            resource_ids=(rid,),
            current_version=current,
            details={"path": pointer, "kind": kind, "given_version": version},
        )
    return None


def _bind(spec: ToolSpec, args: dict[str, Any], ctx: ValidationContext) -> dict[str, Any] | ActionError:
    out = args
    for name, resolver in spec.bindings.items():
        if name not in args:
            continue
        value = args[name]
        values = value if isinstance(value, list) else [value]
        resolved = []
        for i, item in enumerate(values):
            pointer = f"/{name}/{i}" if isinstance(value, list) else f"/{name}"
            matches = list(resolver(ctx, item))
            if len(matches) > 1:
                return ActionError.of(
                    "ambiguous_reference",
                    f"{item!r} matches {len(matches)} entities; choose one by id",
                    candidates=[dict(m) for m in matches],
                    details={"path": pointer, "value": item},
                )
            if not matches:
                return ActionError.of(
                    "invalid_arguments",
                    f"nothing matches {item!r}",
                    field_errors=[FieldError(path=pointer, message=f"no entity matches {item!r}")],
                )
            resolved.append(matches[0]["id"])
        new_value = resolved if isinstance(value, list) else resolved[0]
        if new_value != value:
            if out is args:
                out = dict(args)
            out[name] = new_value
    return out


def after(
    later: str, earlier: str, *, strict: bool = True
) -> Callable[[Mapping[str, Any]], Iterable[FieldError]]:
    """A refinement: argument ``later`` must come after ``earlier`` (timestamps, numbers, strings).

    An absent or null argument is not checked. Two values that cannot be ordered (a timestamp with
    a UTC offset and one without, a timestamp and a word, a number and a string) are an error on
    ``later``: the rule cannot be shown to hold.
    """
    from datetime import datetime

    def parse(value: Any) -> Any:
        if isinstance(value, str):
            try:
                return datetime.fromisoformat(value)
            except ValueError:
                return value
        return value

    def refine(args: Mapping[str, Any]) -> Iterable[FieldError]:
        if args.get(later) is None or args.get(earlier) is None:
            return ()
        a, b = parse(args[later]), parse(args[earlier])
        try:
            bad = a <= b if strict else a < b
        except TypeError:
            return (FieldError(path=f"/{later}", message=_incomparable(later, earlier, a, b)),)
        if bad:
            word = "after" if strict else "at or after"
            return (FieldError(path=f"/{later}", message=f"{later} must be {word} {earlier}"),)
        return ()

    refine.__name__ = f"{later}_after_{earlier}"
    return refine


def _incomparable(later: str, earlier: str, a: Any, b: Any) -> str:
    from datetime import datetime

    if isinstance(a, datetime) and isinstance(b, datetime):
        return f"{later} and {earlier} must both carry a UTC offset (or neither) to be compared"
    return f"{later} cannot be compared with {earlier}: give both as the same kind of value"
