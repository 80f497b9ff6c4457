"""The error taxonomy: what the model or a human must act on, and what a developer got wrong.

Two channels, never mixed:

* **Values** (``ActionError``) travel inside an ``Observation``. They describe a failure of a
  proposed action that the model, a user or an operator can recover from, each with a stable
  ``category`` string and the recoveries it allows.
* **Exceptions** (``ActionspaceError`` and subclasses) are raised for developer mistakes: bad
  configuration, misuse of the API, a tool defined twice.

The tree::

    ActionError (value, see CATEGORIES)
      parse_error          parse      model         re-emit the call
      unknown_tool         resolve    model         choose among offered tools
      version_mismatch     resolve    model         re-read the definition, rebuild args
      invalid_arguments    validate   model         change arguments
      ambiguous_reference  validate   user / model  disambiguate among candidates
      stale_reference      validate   model         observe again, act on current_version
      permission_denied    authorize  user / policy narrow scope or request authorization
      policy_violation     authorize  user / policy drop tainted input or ask to declassify
      budget_exceeded      authorize  user          cheaper path or more budget
      needs_approval       authorize  human         wait for the decision
      conflict             commit     model         re-read, merge, act again
      rate_limited         execute    runtime       wait retry_after, then retry
      transient            execute    runtime       retry with the same key (bounded)
      unknown_commit       execute    runtime/human query status; else reconcile by hand
      permanent            execute    -             stop or take another path
      cancelled            execute    -             -
      unclassified         execute    -             read diagnostics
      internal             anywhere   maintainers   report

    ActionspaceError (exception; every exception a user may catch derives from it)
      ConfigurationError      a Runtime, store or policy was configured wrongly
        StoreNotFoundError    open_trace_store(url, create=False) found no store at url
        PolicyHTTPError       evaluation: the chat-completions server refused or stayed unavailable
      ToolDefinitionError     a tool cannot be turned into a ToolSpec
        DuplicateToolError    name@version registered twice
      UnknownToolError        the API was asked for a tool that is not registered (also KeyError)
      InvalidPlan             a plan cannot be built; .error is the typed error (also ValueError)
      RefError                a $ref cannot be parsed or does not resolve (also ValueError)
        TemplateTooLarge      a plan's $template expands past MAX_TEMPLATE_CHARS
      SuiteError              evaluation: a suite or task is malformed, or its file unreadable
      BfclDataError           evaluation: BFCL data could not be downloaded, verified or read
      BfclAnswerError         evaluation: a BFCL possible answer has the wrong shape (also ValueError)
      ApiError                service: a request fails as an HTTP status with an error body
      ApprovalRefused         approvals: a rule (four eyes) refuses this approver; .error is the typed error
      RunStateError           a run's stored state is damaged or of a newer version (also ValueError)
      StoreClosedError        a store was read or written after its close() (also ValueError)

    ToolError (exception a tool raises to report a categorized failure; becomes an ActionError)

    Abandoned (exception thrown into a write's commit protocol when its caller was cancelled
               while the tool ran; the protocol notes the entry unknown and re-raises it)

``store_unavailable(exc)`` tells a store driver's "the database did not answer" (SQLite locked or
busy, PostgreSQL's connection lost) from other failures: the service answers it ``503 transient``,
the command line with one line, neither as a failure of its own.

The classes are defined here and re-exported where they are raised (``actionspace.plan``, ``.trace.store``,
``.evaluation.*``, ``.service.errors``), so either import path works. This module imports the standard
library, ``actionspace._canonical`` (for ``ActionError.checked``) and ``actionspace._store_errors``.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal, cast, get_args

from actionspace._canonical import normalize
from actionspace._store_errors import store_unavailable

__all__ = [
    "CATEGORIES",
    "DEFAULT_RECOVERY",
    "REDACTED",
    "RETRYABLE",
    "Abandoned",
    "ActionError",
    "ActionspaceError",
    "ApiError",
    "ApprovalRefused",
    "BfclAnswerError",
    "BfclDataError",
    "Category",
    "ConfigurationError",
    "DuplicateToolError",
    "FieldError",
    "InvalidPlan",
    "PolicyHTTPError",
    "RefError",
    "RunStateError",
    "StoreClosedError",
    "StoreNotFoundError",
    "SuiteError",
    "TemplateTooLarge",
    "ToolDefinitionError",
    "ToolError",
    "UnknownToolError",
    "redact",
    "redact_value",
    "said",
    "said_safely",
    "store_unavailable",
]

Category = Literal[
    "parse_error",
    "unknown_tool",
    "version_mismatch",
    "invalid_arguments",
    "ambiguous_reference",
    "stale_reference",
    "permission_denied",
    "policy_violation",
    "budget_exceeded",
    "needs_approval",
    "conflict",
    "rate_limited",
    "transient",
    "unknown_commit",
    "permanent",
    "cancelled",
    "unclassified",
    "internal",
]

CATEGORIES: Final[tuple[Category, ...]] = get_args(Category)

DEFAULT_RECOVERY: Final[Mapping[Category, tuple[str, ...]]] = {
    "parse_error": ("re_emit_call",),
    "unknown_tool": ("choose_offered_tool",),
    "version_mismatch": ("reread_definition", "rebuild_arguments"),
    "invalid_arguments": ("change_arguments",),
    "ambiguous_reference": ("disambiguate",),
    "stale_reference": ("observe_again", "act_on_current_version"),
    "permission_denied": ("narrow_scope", "request_authorization"),
    "policy_violation": ("drop_tainted_input", "request_declassification"),
    "budget_exceeded": ("cheaper_path", "request_budget"),
    "needs_approval": ("wait_for_approval",),
    "conflict": ("reread", "merge", "act_again"),
    "rate_limited": ("wait_and_retry",),
    "transient": ("retry_same_key",),
    "unknown_commit": ("query_status", "reconcile_by_hand"),
    "permanent": ("stop", "take_another_path"),
    "cancelled": (),
    "unclassified": ("read_diagnostics",),
    "internal": ("report",),
}

RETRYABLE: Final[frozenset[Category]] = frozenset({"rate_limited", "transient"})


def said(value: object) -> str:
    """``str(value)``: the message of an exception a tool (or a user's hook) raised, or a value a
    tool handed back as text; when its own ``__str__`` raises, a note naming its type and what it
    raised. Never raises itself."""
    if type(value) is str:
        return value
    try:
        return str(value)
    except Exception as inner:
        return f"<{type(value).__name__}: its text cannot be read ({type(inner).__name__})>"


REDACTED: Final = "***"  # what redact() puts in place of a credential

_SECRET = re.compile(
    # possessive, bounded repeats where a run may still fail to match: hostile text is scanned in linear time
    r"(?P<url>\b[a-z][a-z0-9+.-]{0,30}+://[^\s:/@]{0,256}+:)[^\s@]{1,512}+(?=@)"
    r"|(?P<auth>\b(?:proxy-)?authorization[\"']?\s{0,8}+[:=]\s{0,8}+[\"']?"
    r"(?:(?:bearer|basic|token|digest|negotiate)\s{1,8}+)?)[^\s\"',;]++"
    r"|(?P<bearer>\bbearer\s{1,8}+)(?=[\w.~+/-]{0,256}?[\d.~+/=-])[\w.~+/-]{8,}+=*"
    r"|(?P<basic>\bbasic\s{1,8}+)(?P<b64>[a-z0-9+/]{8,1024}+={0,2})(?![a-z0-9+/=])"
    r"|(?P<pair>(?:(?:password|passwd|pwd|secret|api[_-]?key|apikey|access[_-]?key|private[_-]?key)[\w-]{0,32}+"
    r"|(?:\b|[_-])token)(?P<quote>[\"'])?\s{0,8}+(?(quote):|=)\s{0,8}+[\"']?)[^\s\"'&,;]++"
    r"|-----BEGIN[a-z ]{0,40}+PRIVATE KEY-----(?:.*?-----END[a-z ]{0,40}+PRIVATE KEY-----|.*\Z)"
    r"|\b(?:sk-[\w-]{6,}+|(?:sk|rk)_(?:live|test)_\w{8,}+|gh[pousr]_\w{20,}+|github_pat_\w{20,}+"
    r"|(?:akia|asia)[a-z0-9]{16}\b|xox[abposr]-[\w-]{8,}+|aiza[\w-]{30,}+|eyJ[\w-]{4,256}+\.[\w-]{4,}+\.[\w-]*)",
    re.IGNORECASE | re.DOTALL,
)


def _hidden(match: re.Match[str]) -> str:
    kept = match.group("url") or match.group("auth") or match.group("bearer") or match.group("pair")
    if kept:
        return kept + REDACTED
    if match.group("basic") is None:
        return REDACTED
    try:  # "Basic" before base64 of "user:password"; any other word after "basic" stays
        decoded = base64.b64decode(match.group("b64"), validate=True)
    except ValueError:  # binascii.Error included
        decoded = b""
    return match.group("basic") + REDACTED if b":" in decoded else match.group(0)


def redact(text: str) -> str:
    """``text``, each credential replaced by :data:`REDACTED`: a URL's password (``scheme://user:***@host``),
    an ``Authorization``/``Bearer``/``Basic`` credential, a ``password=``/``secret=``/``api_key=``/``token=``
    value, a private key block, API keys of known shapes (``sk-…``, ``ghp_…``, ``AKIA…``, ``xoxb-…``, JWT)."""
    return _SECRET.sub(_hidden, text)


def said_safely(value: object, limit: int = 500) -> str:
    """:func:`said` of ``value``, redacted (:func:`redact`) before it is cut to ``limit`` characters:
    no cut leaves part of a credential (a very long text is first cut at a space far past ``limit``)."""
    text = said(value)
    if len(text) > 4 * limit + 1024:  # drop the run the cut split: it may be part of a credential
        head = text[: 4 * limit + 1024].rsplit(None, 1)
        text = head[0] if len(head) == 2 else ""
    return redact(text)[:limit]


def redact_value(value: Any) -> Any:
    """``value`` with :func:`redact` applied to each string in it (mappings, lists, tuples walked)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return {key: redact_value(item) for key, item in value.items()}
    if type(value) in (list, tuple):
        return type(value)(redact_value(item) for item in value)
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class FieldError:
    """One rejected argument: a JSON pointer into the arguments and why it was rejected."""

    path: str
    """JSON pointer (RFC 6901) into the call's arguments, ``""`` for the whole object."""
    message: str
    """Human-readable reason, safe to show the model."""

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "message": self.message}


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionError:
    """A failure of a proposed action, as a value the model or a human acts on.

    Build one with :meth:`of`, which fills ``retryable`` and ``recovery`` from the category.
    """

    category: Category
    """One of :data:`CATEGORIES`; the only field a caller should branch on."""
    message: str
    """For people; never parsed."""
    retryable: bool = False
    """True only for ``transient`` and ``rate_limited``."""
    retry_after: float | None = None
    """Seconds to wait before a retry (``rate_limited``), else None."""
    recovery: tuple[str, ...] = ()
    """The next actions this category allows."""
    details: Mapping[str, Any] = field(default_factory=dict)
    """Structured facts safe to show the model."""
    resource_ids: tuple[str, ...] = ()
    """Resources the failure concerns."""
    vendor_code: str | None = None
    """The original error code or exception name, for diagnosis."""
    field_errors: tuple[FieldError, ...] = ()
    """``invalid_arguments``: every rejected field with its JSON pointer."""
    candidates: tuple[Mapping[str, Any], ...] = ()
    """``ambiguous_reference``: the entities a reference could mean."""
    current_version: str | None = None
    """``stale_reference``: the version the resource has now."""
    alternatives: tuple[Any, ...] = ()
    """``conflict`` and others: known ways forward (free slots, other tools)."""

    @classmethod
    def of(cls, category: Category, message: str, **fields: Any) -> ActionError:
        """An error of ``category`` with its default recovery and retryability."""
        if category not in DEFAULT_RECOVERY:
            raise ValueError(f"unknown error category {category!r}")
        fields.setdefault("retryable", category in RETRYABLE)
        fields.setdefault("recovery", DEFAULT_RECOVERY[category])
        for name in ("field_errors", "candidates", "alternatives", "resource_ids", "recovery"):
            if name in fields and not isinstance(fields[name], tuple):
                fields[name] = tuple(fields[name])
        return cls(category=category, message=message, **fields)

    @classmethod
    def unsent(cls, what: str, exc: BaseException) -> ActionError:
        """``transient`` for a store that failed before the send (``what`` could not be read or
        written): nothing was sent (``details["sent"]`` False), so asking again is safe."""
        why = f"{type(exc).__name__}: {said_safely(exc, 200)}"
        return cls.of("transient", f"{what} ({why}); nothing was sent", details={"sent": False})

    def redacted(self) -> ActionError:
        """This error with :func:`redact` applied to its message, details, field errors and vendor code."""
        fields = tuple(FieldError(path=f.path, message=redact(said(f.message))) for f in self.field_errors)
        code = None if self.vendor_code is None else redact(said(self.vendor_code))
        message, details = redact(said(self.message)), redact_value(self.details)
        return replace(self, message=message, details=details, field_errors=fields, vendor_code=code)

    def to_dict(self) -> dict[str, Any]:
        """Stable JSON shape; empty optional fields are kept so consumers see one schema."""
        return {
            "category": self.category,
            "message": self.message,
            "retryable": self.retryable,
            "retry_after": self.retry_after,
            "recovery": list(self.recovery),
            "details": dict(self.details),
            "resource_ids": list(self.resource_ids),
            "vendor_code": self.vendor_code,
            "field_errors": [f.to_dict() for f in self.field_errors],
            "candidates": [dict(c) for c in self.candidates],
            "current_version": self.current_version,
            "alternatives": list(self.alternatives),
        }

    def checked(self) -> ActionError:
        """This error with each field of its declared type, as the stores write it. A tool's own
        error (``ToolError``) is taken as it comes, after its effect may have happened: a message or
        an id that is not text is its text, ``details``, ``candidates`` and ``alternatives`` are
        made plain JSON (:func:`~actionspace._canonical.normalize`), a ``retry_after`` that is not
        a number of seconds is dropped. Nothing here raises."""
        details = normalize(self.details)
        version = self.current_version
        return ActionError(
            category=self.category,
            message=said(self.message),
            retryable=self.retryable is True,
            retry_after=_seconds(self.retry_after),
            recovery=tuple(said(r) for r in _items(self.recovery)),
            details=details if type(details) is dict else {"details": details},
            resource_ids=tuple(said(r) for r in _items(self.resource_ids)),
            vendor_code=None if self.vendor_code is None else said(self.vendor_code),
            field_errors=tuple(
                FieldError(path=said(f.path), message=said(f.message))
                for f in _items(self.field_errors)
                if isinstance(f, FieldError)
            ),
            candidates=tuple(c for c in map(normalize, _items(self.candidates)) if type(c) is dict),
            current_version=None if version is None else said(version),
            alternatives=tuple(normalize(a) for a in _items(self.alternatives)),
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ActionError:
        category = data["category"]
        if category not in DEFAULT_RECOVERY:
            raise ValueError(f"unknown error category {category!r}")
        return cls(
            category=cast(Category, category),
            message=str(data.get("message", "")),
            retryable=bool(data.get("retryable", False)),
            retry_after=data.get("retry_after"),
            recovery=tuple(data.get("recovery", ())),
            details=dict(data.get("details") or {}),
            resource_ids=tuple(data.get("resource_ids", ())),
            vendor_code=data.get("vendor_code"),
            field_errors=tuple(
                FieldError(path=f["path"], message=f["message"]) for f in data.get("field_errors", ())
            ),
            candidates=tuple(dict(c) for c in data.get("candidates", ())),
            current_version=data.get("current_version"),
            alternatives=tuple(data.get("alternatives", ())),
        )


def _items(value: object) -> tuple[Any, ...]:
    """The items of a field that should hold a tuple: a string is one item; what cannot be iterated, none."""
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        return (value,) if isinstance(value, str) else ()
    try:
        return tuple(value)
    except Exception:
        return ()


def _seconds(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < math.inf:
        return float(value)
    return None


class ToolError(Exception):
    """Raised by a tool to report a failure with a known category, which the executor turns into the
    ``ActionError`` of the observation: ``raise ToolError("conflict", "slot taken", alternatives=[...])``."""

    def __init__(self, category: Category, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.error = ActionError.of(category, message, **fields)


class Abandoned(Exception):
    """Thrown into a protocol waiting for its send's outcome when the caller stopped waiting (its
    task was cancelled while the tool ran): the entry moves to ``unknown`` and is noted."""


class ActionspaceError(Exception):
    """Base of the exceptions raised for developer mistakes (never for model mistakes)."""


class ConfigurationError(ActionspaceError):
    """A Runtime, store, policy or tool option was configured wrongly."""


class ToolDefinitionError(ActionspaceError):
    """A function or schema cannot be turned into a ToolSpec."""


class DuplicateToolError(ToolDefinitionError):
    """The same ``name@version`` was registered twice."""


class UnknownToolError(ActionspaceError, KeyError):
    """The API (not the model) asked for a tool that is not registered."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown tool"


class StoreNotFoundError(ConfigurationError):
    """``open_trace_store(url, create=False)`` found no store at ``url``."""


class PolicyHTTPError(ConfigurationError):
    """The chat-completions server refused the request or stayed unavailable past the retry bounds."""

    status: int | None
    """The last HTTP status; None when no response arrived (timeout, connection refused)."""
    attempts: int
    """Requests sent before giving up."""
    body: str
    """The start of the last error response body (at most 500 characters)."""

    def __init__(self, message: str, *, status: int | None, attempts: int, body: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.attempts = attempts
        self.body = body


class InvalidPlan(ActionspaceError, ValueError):
    """A plan that cannot be built; ``error`` is the typed error a model would receive."""

    def __init__(self, error: ActionError) -> None:
        super().__init__(error.message)
        self.error = error


class RefError(ActionspaceError, ValueError):
    """A reference that cannot be parsed or does not resolve."""


class TemplateTooLarge(RefError):
    """A plan's ``$template`` expands past ``actionspace.plan.refs.MAX_TEMPLATE_CHARS``."""


class SuiteError(ActionspaceError):
    """A suite or task is malformed, or a suite file cannot be read."""


class BfclDataError(ActionspaceError):
    """The BFCL data could not be downloaded, verified or read."""


class BfclAnswerError(ActionspaceError, ValueError):
    """A possible answer is not in the shape BFCL's own checker reads."""


class ApiError(ActionspaceError):
    """An expected failure of an HTTP API request, answered as ``status`` with an error body: its
    ``error.message`` (for people) is ``message``, its ``error.category`` (one of :data:`CATEGORIES`, or
    None) ``category``."""

    status: int
    message: str
    category: str | None

    def __init__(self, status: int, message: str, *, category: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.category = category


class ApprovalRefused(ActionspaceError):
    """An approval a rule refuses (the four-eyes rule, ``approval.four_eyes``); ``error`` is its
    ``permission_denied`` error. Nothing was recorded: the request stays pending."""

    def __init__(self, error: ActionError) -> None:
        super().__init__(error.message)
        self.error = error


class RunStateError(ActionspaceError, ValueError):
    """A run's stored state is damaged or of a newer format: raised, never read as a new run."""


class StoreClosedError(ActionspaceError, ValueError):
    """A store was read or written after its ``close()`` (a ``ValueError``, as before this class); also
    what a read on another thread gets if it starts too late to finish first (``docs/quickstart.md``)."""
