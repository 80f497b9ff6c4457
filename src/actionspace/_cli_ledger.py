"""``actionspace ledger …`` and ``actionspace approvals …``: reconcile and decide by hand.

An edge of the CLI (it opens a whole Runtime), so it lives beside ``cli.py``, not in ``ledger/``.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar, cast

import typer
from rich.console import Console

from actionspace._cli_app import CliApp
from actionspace._cli_tables import (
    cell,
    clipped,
    fail,
    id_table,
    on_interrupt,
    one_line,
    say_store,
    short_time,
    shown_store,
    unique,
    utf8_text,
)

if TYPE_CHECKING:
    from actionspace._cli_read import StoreReader, Wanted

__all__ = ["approvals_app", "ledger_app", "never_opens"]

_T = TypeVar("_T")

ledger_app = CliApp(
    help="The idempotency ledger: list actions, show one, reconcile an unknown_commit.", no_args_is_help=True
)
approvals_app = CliApp(help="Approval requests: list, show, approve or deny.", no_args_is_help=True)

StoreOpt = Annotated[
    str | None, typer.Option("--store", help="Store URL (default: ACTIONSPACE_STORE or ~/.actionspace).")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]
KeyArg = Annotated[str, typer.Argument(help="A ledger key or a unique prefix of it.", callback=utf8_text)]
RequestArg = Annotated[
    str, typer.Argument(help="An approval request id or a unique prefix of it.", callback=utf8_text)
]
ByOpt = Annotated[str, typer.Option(help="Who decides (recorded with the decision).", callback=utf8_text)]
ReasonOpt = Annotated[str | None, typer.Option(help="Why (recorded with the decision).", callback=utf8_text)]
RevealOpt = Annotated[
    bool,
    typer.Option("--reveal", help="Show the values of runs that held secret data (redacted by default)."),
]


def _runtime(store: str | None, wanted: Wanted) -> Any:
    """The runtime on ``store``, once it is known to hold ``wanted`` (:func:`_reader`); one line and
    exit 1 otherwise, as for :func:`_reader`."""
    from actionspace._cli_read import StoreReader
    from actionspace.runtime import Runtime

    _opening(store, lambda url: StoreReader(url, wanted)).close()  # _reader named the store already
    on_interrupt("the decision may or may not have been recorded: look with 'show' before deciding again")
    return _opening(store, lambda url: Runtime(url, recover_on_start=False))


def _reader(store: str | None, wanted: Wanted) -> StoreReader:
    """``store`` opened for reading only: it is neither created nor changed, a store without
    ``wanted`` is "no ledger in …"; one line and exit 1 for any store it cannot read."""
    from actionspace._cli_read import StoreReader

    on_interrupt("nothing was written")
    return _opening(store, lambda url: StoreReader(url, wanted), say=True)


def _opening(store: str | None, opener: Callable[[str], _T], *, say: bool = False) -> _T:
    """``opener(url)``; one line and exit 1 when the URL is malformed, there is no store, its file
    cannot be opened, or it is not a store this actionspace reads (another program's, a newer schema)."""
    from actionspace.errors import ConfigurationError, store_unavailable
    from actionspace.trace.store import default_store_url

    url = store or default_store_url()
    if say:
        say_store(url)
    try:
        return opener(url)
    except ConfigurationError as exc:
        _fail(str(exc))
    except OSError as exc:  # its folder cannot be made: a file in the way, a name too long
        _fail(f"cannot open store {shown_store(url)}: {exc.strerror or exc}")
    except sqlite3.DatabaseError as exc:
        if (why := never_opens(url, exc)) is not None:
            _fail(why)
        if store_unavailable(exc):  # locked or busy: main() says so, and that it may be asked again
            raise
        _fail(f"cannot read store {shown_store(url)}: {exc}")


def never_opens(url: str, exc: sqlite3.DatabaseError) -> str | None:
    """Why SQLite refused ``url`` for good, in one line (:func:`~actionspace._cli_tables.refused_store`)."""
    from actionspace._cli_tables import refused_store

    return refused_store(url, exc)


_SCAN = 100_000
"""How many entries a prefix is matched against (the newest first)."""
_MAX_LIMIT = 1_000_000
"""The most entries a listing shows."""
_OUTCOMES = ("committed", "failed", "not_committed")
"""What ``ledger resolve --outcome`` takes; ``not_committed`` (the HTTP API's word) means ``failed``."""
_LISTED = 100
"""How many approval requests ``approvals list`` shows (the newest)."""


def _ledger_key(ledger: StoreReader, prefix: str) -> str:
    if ledger.ledger_get(prefix) is not None:
        return prefix
    return unique(prefix, (e.key for e in ledger.ledger_list(state=None, limit=_SCAN)), "ledger entry")


def _request_id(approvals: StoreReader, prefix: str) -> str:
    if approvals.approval_get(prefix) is not None:
        return prefix
    listed = approvals.approvals_list(status=None, limit=_SCAN)
    return unique(prefix, (r.id for r in listed), "approval request")


def _visible(reader: StoreReader, entries: list[Any], reveal: bool) -> list[dict[str, Any]]:
    """The entries as JSON; values of runs that held secret data are redacted unless ``reveal``."""
    if reveal:
        return [e.to_dict() for e in entries]
    from actionspace.trace.events import TraceStore
    from actionspace.trace.redact_ledger import visible_entries

    return visible_entries(entries, cast(TraceStore, reader), None)  # it reads events(run_id) only


def _fail(message: str) -> NoReturn:
    fail(message)


def _said(exc: KeyError | ValueError) -> str:
    """The message of ``exc`` as written (``str`` of a KeyError is its repr)."""
    return str(exc.args[0]) if exc.args else str(exc)


def _one_of(value: str | None, allowed: tuple[str, ...], option: str) -> None:
    """Refuse a filter no stored row can match: a typo would read as "nothing there"."""
    if value is not None and value not in allowed:
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(allowed)}", param_hint=option)


@ledger_app.command("list")
def ledger_list(
    store: StoreOpt = None,
    state: Annotated[str | None, typer.Option(help="Only this state, e.g. unknown_commit.")] = None,
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, max=_MAX_LIMIT, help="Show at most N entries.")
    ] = 50,
    json_out: JsonOpt = False,
    reveal: RevealOpt = False,
) -> None:
    """Ledger entries, most recently updated first.

    Example: actionspace ledger list --state unknown_commit -n 20
    """
    from actionspace.ledger.entries import STATES

    _one_of(state, STATES, "--state")
    reader = _reader(store, "ledger")
    try:
        entries = reader.ledger_list(state=state, limit=limit)
        shown = _visible(reader, entries, reveal)
    finally:
        reader.close()
    if json_out:
        typer.echo(json.dumps(shown, indent=2))
        return
    table = id_table(f"{len(entries)} ledger entries", "key", [e.key for e in entries], "state", "action")
    for e in entries:
        style = {"committed": "green", "failed": "red", "unknown_commit": "bold red"}.get(e.state, "yellow")
        action = f"{e.tool} · {e.run_id}/{e.node_id} · {e.attempts}× · {short_time(e.updated_at)}"
        table.add_row(cell(e.key), cell(e.state, style), cell(action))
    Console().print(table)


@ledger_app.command("show")
def ledger_show(key: KeyArg, store: StoreOpt = None, reveal: RevealOpt = False) -> None:
    """One entry (KEY or a unique prefix of it) as JSON: arguments, state, outcome, resolution.

    Example: actionspace ledger show as1_3f2a
    """
    reader = _reader(store, "ledger")
    try:
        key = _ledger_key(reader, key)
        entry = reader.ledger_get(key)
        shown = _visible(reader, [entry], reveal)[0] if entry is not None else None
    finally:
        reader.close()
    if shown is None:
        _fail(f"no ledger entry {clipped(key)}")
    typer.echo(json.dumps(shown, indent=2))


@ledger_app.command("resolve")
def ledger_resolve(
    key: KeyArg,
    outcome: Annotated[
        str,
        typer.Option(help="What really happened: committed, or failed (the HTTP API's not_committed)."),
    ],
    by: Annotated[str, typer.Option(help="Who reconciled it.", callback=utf8_text)],
    reason: Annotated[
        str,
        typer.Option(help="The evidence, e.g. 'payment p17 seen in the bank statement'.", callback=utf8_text),
    ],
    store: StoreOpt = None,
) -> None:
    """Reconcile an unknown_commit (KEY or a unique prefix) by hand; recorded in the entry and the trace.

    Example: actionspace ledger resolve as1_3f2a --outcome committed --by ann --reason 'in the statement'
    """
    if outcome not in _OUTCOMES:  # before the store is read: nothing to look up for a typo
        _fail("outcome must be 'committed' or 'failed'")
    outcome = "failed" if outcome == "not_committed" else outcome
    reader = _reader(store, "ledger")
    try:
        key = _ledger_key(reader, key)
    finally:
        reader.close()
    rt = _runtime(store, "ledger")
    try:
        entry = rt.resolve(key, outcome=outcome, by=by, reason=reason)
    except (KeyError, ValueError) as exc:
        _fail(_said(exc))
    finally:
        rt.close()
    typer.echo(f"{entry.key}: {entry.state} (by {by})")


@approvals_app.command("list")
def approvals_list(
    store: StoreOpt = None,
    status: Annotated[
        str | None, typer.Option(help="pending (default), approved, denied, expired, consumed; 'all'.")
    ] = "pending",
    json_out: JsonOpt = False,
) -> None:
    """Approval requests, newest first.

    Example: actionspace approvals list --status all --json
    """
    from typing import get_args

    from actionspace.approval.requests import ApprovalStatus

    _one_of(status, (*get_args(ApprovalStatus), "all"), "--status")
    reader = _reader(store, "approvals")
    try:
        requests = reader.approvals_list(status=None if status == "all" else status, limit=_LISTED)
    finally:
        reader.close()
    if json_out:
        typer.echo(json.dumps([r.to_dict() for r in requests], indent=2))
        return
    table = id_table(
        f"{len(requests)} approval requests", "id", [r.id for r in requests], "status", "request"
    )
    for r in requests:
        args = ", ".join(f"{k}={v!r} ({r.provenance.get(k, '?')})" for k, v in r.arguments.items())
        what = f"{r.tool} · {short_time(r.created_at)}\n{r.reason}\n{args}"
        table.add_row(cell(r.id), cell(r.status), cell(what))
    Console().print(table)


@approvals_app.command("show")
def approvals_show(request_id: RequestArg, store: StoreOpt = None) -> None:
    """One request (ID or a unique prefix) with its preview (arguments, provenance, effects) as JSON.

    Example: actionspace approvals show apr_7c1e
    """
    reader = _reader(store, "approvals")
    try:
        request = reader.approval_get(_request_id(reader, request_id))
    finally:
        reader.close()
    if request is None:
        _fail(f"no approval request {clipped(request_id)}")
    typer.echo(json.dumps(request.to_dict(), indent=2))


def _decide(
    request_id: str,
    store: str | None,
    approve: bool,
    by: str,
    reason: str | None,
    ttl: float,
    *,
    distinct: bool = False,
    scopes: tuple[str, ...] = (),
    allow_own: bool = False,
) -> None:
    """Decide the request; an approval refused (:func:`_refusal`, or under ``distinct`` the
    four-eyes rule of ``approval.four_eyes``) is one line on stderr and exit 2 (a usage error:
    another ``--by``, or one said to be cleared, may approve), nothing recorded."""
    from actionspace.approval.four_eyes import DistinctApprover
    from actionspace.errors import ApprovalRefused

    reader = _reader(store, "approvals")
    try:
        request_id = _request_id(reader, request_id)
    finally:
        reader.close()
    rt = _runtime(store, "approvals")
    approvals = DistinctApprover(rt.approvals) if distinct else rt.approvals
    if approve and (refused := _refusal(rt, request_id, by, scopes, allow_own=allow_own)) is not None:
        rt.close()
        typer.echo(one_line(refused), err=True)
        raise typer.Exit(2)
    try:
        if approve:
            request = approvals.approve(request_id, by=by, reason=reason, ttl_s=ttl)
        else:
            request = approvals.deny(request_id, by=by, reason=reason)
    except ApprovalRefused as exc:
        rt.close()
        typer.echo(one_line(exc.error.message), err=True)
        raise typer.Exit(2) from None
    except (KeyError, ValueError) as exc:
        rt.close()
        _fail(_said(exc))
    try:
        from actionspace.durable.approval import wake_decided

        woken = wake_decided(rt.store_url, request, rt.durable)
    finally:
        rt.close()
    suffix = " (its durable plan was woken)" if woken else ""
    typer.echo(f"{request.id}: {request.status} by {by}{suffix}")


def _utf8_texts(values: list[str] | None) -> list[str]:
    """Typer callback of a repeatable option: :func:`utf8_text` of each value."""
    return [utf8_text(v) or "" for v in values or []]


def _refusal(rt: Any, request_id: str, by: str, scopes: tuple[str, ...], *, allow_own: bool) -> str | None:
    """Why ``by`` (holding ``scopes``) may not approve the request, as the HTTP API judges it; None
    when it may. Refused: a ``by`` the request's values are redacted for (it would approve a call
    it may not see; ``--scope`` says what clearance it holds), and, unless ``allow_own``, a ``by``
    equal to the recorded proposer's id (the four-eyes rule, for the one case this command can tell)."""
    from collections.abc import Mapping

    from actionspace.approval.requests import proposer_of
    from actionspace.policy.principal import Principal
    from actionspace.service.views import clearance, withheld_label

    request = rt.approvals.get(request_id)
    if request is None:
        return None  # approving says "no approval request …" as before
    withheld = withheld_label(rt.trace, request, Principal(id=by, scopes=scopes))
    if withheld is not None:
        needs = clearance(withheld)
        return (
            f"approval of request {request.id} refused: {by!r} may not see the values of the call"
            f" (labelled {withheld.confidentiality}), so may not approve it; approving needs {needs}."
            f" If {by!r} holds it, say so with --scope labels:{withheld.confidentiality}."
            " Denying it stays allowed."
        )
    recorded = request.details.get("proposed_by")
    proposer = proposer_of(recorded)[0] if isinstance(recorded, Mapping) else ""
    if proposer and proposer == by and not allow_own:
        return (
            f"approval of request {request.id} refused: {by!r} proposed this call (four-eyes rule:"
            " another principal must approve; --allow-own-approval lets the proposer approve its own"
            " call). Denying it stays allowed."
        )
    return None


@approvals_app.command("approve")
def approvals_approve(
    request_id: RequestArg,
    by: ByOpt,
    reason: ReasonOpt = None,
    ttl: Annotated[float, typer.Option(help="Seconds the approval stays valid.")] = 3600.0,
    store: StoreOpt = None,
    scope: Annotated[
        list[str] | None,
        typer.Option(
            "--scope",
            help="A scope --by holds, e.g. labels:secret (repeatable): a call whose values are"
            " labelled is approved only by a --by cleared to read them (this scope, or a reader the"
            " label names), else exit 2.",
            callback=_utf8_texts,
        ),
    ] = None,
    distinct_approver: Annotated[
        bool,
        typer.Option(
            "--distinct-approver",
            help="Four-eyes rule, strict: also refuse (exit 2) a request that recorded no proposer.",
        ),
    ] = False,
    allow_own_approval: Annotated[
        bool,
        typer.Option(
            "--allow-own-approval",
            help="Let --by approve a call it proposed itself (refused by default, exit 2).",
        ),
    ] = False,
) -> None:
    """Approve exactly the previewed call (bound to its argument digest).

    Example: actionspace approvals approve apr_7c1e --by ann --reason 'checked the amount' --ttl 600
    """
    if not (ttl > 0 and math.isfinite(ttl)):  # NaN compares false with every time; inf never expires
        raise typer.BadParameter("takes a positive, finite number of seconds", param_hint="--ttl")
    if distinct_approver and allow_own_approval:
        raise typer.BadParameter(
            "cannot be given with --distinct-approver", param_hint="--allow-own-approval"
        )
    scopes = tuple(scope or ())
    _decide(
        request_id,
        store,
        True,
        by,
        reason,
        ttl,
        distinct=distinct_approver,
        scopes=scopes,
        allow_own=allow_own_approval,
    )


@approvals_app.command("deny")
def approvals_deny(
    request_id: RequestArg,
    by: ByOpt,
    reason: ReasonOpt = None,
    store: StoreOpt = None,
) -> None:
    """Deny the request; the call comes back as permission_denied naming who and why.

    Example: actionspace approvals deny apr_7c1e --by ann --reason 'wrong recipient'
    """
    _decide(request_id, store, False, by, reason, 0.0)
