"""What the frames of a plain new write (pipeline/_write.py, sync; pipeline/_awrite.py, awaited)
share: the decision to take a call, its preparation, the arguments' one canonical text, and the
commit of a first send that succeeded, with an ``int`` result's envelope made beside it.

Each function here does for such a call exactly what the general path's own does (named in each);
``tests/pipeline/test_w19_write_frame.py`` and ``tests/pipeline/test_w20_write_frames.py`` hold the
frames equal to the general path.
"""

from __future__ import annotations

import hashlib
import json.encoder
import time
from dataclasses import fields
from json.encoder import encode_basestring as _quote
from typing import TYPE_CHECKING, Any

from actionspace import _crash
from actionspace._canonical import digest_json, strict_dumps
from actionspace._crash import point
from actionspace.errors import said
from actionspace.execution.ready import Ready
from actionspace.ledger.commit import _COMMITTABLE, _hold_unrecorded
from actionspace.ledger.entries import Encoded, LedgerEntry, LedgerStore
from actionspace.ledger.keys import args_digest, idempotency_key
from actionspace.pipeline._run import _INT_DIGESTS, _INT_MEMO
from actionspace.pipeline.stages import node_named
from actionspace.trace.recorder import Recorder
from actionspace.trace.store_encoding import MAX_EVENT_CHARS, Texted, encode_data
from actionspace.types import Observation, Provenance, ToolCall

if TYPE_CHECKING:
    from actionspace.discovery.runs import RunState
    from actionspace.pipeline.engine import Engine
    from actionspace.pipeline.fast import Entry
    from actionspace.pipeline.fast_effects import Verdict

__all__ = [
    "Taken",
    "committed",
    "int_observation",
    "intent_entry",
    "prepared",
    "shared_texted",
    "texted_as",
    "tool_heads",
]

_time = time.time
_FLAT = frozenset({str, int, bool, type(None)})
_SAFE = 2**53 - 1
_new = object.__new__
_sha256 = hashlib.sha256

Taken = tuple["Engine", "RunState", "Entry", "Verdict", "bytes | None", str, bool]
"""What :func:`admitted` decided of a call it takes: (engine, run, entry, flow verdict, the
arguments' canonical text or None, their digest or "", whether its events go to a SQLite trace
store, which takes their payloads' texts made beside them: :func:`texted`)."""

_FLAT_ITEMS = 64  # _encoder.check_plain's flat objects: at most this many items
_join = "".join


def _refuse(value: Any) -> Any:
    raise TypeError(f"not JSON: {type(value).__name__}")


_chunks = getattr(json.encoder, "c_make_encoder", None)
if _chunks is not None:  # _encoder._sorted_dumps's encoder: RFC 8785's text of flat arguments
    _chunks = _chunks(None, _refuse, json.encoder.encode_basestring, None, ":", ",", True, False, False)

_put = {name: LedgerEntry.__dict__[name].__set__ for name in (f.name for f in fields(LedgerEntry))}
_key_of, _run_of, _node_of, _tool_of = _put["key"], _put["run_id"], _put["node_id"], _put["tool"]
_digest_of, _arguments_of, _state_of = _put["args_digest"], _put["arguments"], _put["state"]
_attempts_of, _created_of, _updated_of = _put["attempts"], _put["created_at"], _put["updated_at"]
_observation_of, _remote_of, _error_of = _put["observation"], _put["remote_id"], _put["error"]
_resolution_of = _put["resolution"]
_FIELDS = (
    "key", "run_id", "node_id", "tool", "args_digest", "arguments", "state", "attempts", "created_at",
    "updated_at", "remote_id", "observation", "error", "resolution",
)  # fmt: skip
"""``LedgerEntry``'s fields, each set by :func:`intent_entry` and :func:`committed` by its own
setter (no loop over them): a field added to ``LedgerEntry`` stops this module's import here,
rather than leaving a written entry without it."""
if tuple(_put) != _FIELDS:
    raise AssertionError(f"LedgerEntry's fields are not those the write frame sets: {tuple(_put)}")
_texted = Texted
_TOOL_HEADS: dict[int, tuple[Any, tuple[str, str]]] = {}
"""By a tool spec's ``id``: (the spec, :func:`tool_heads` of it); kept while the spec is (an entry
holds its spec, so the ``id`` is not reused while it is kept). pipeline/_write.py reads it too."""

_SHARED: dict[int, tuple[Any, Any]] = {}
"""By a shared payload's ``id``: (the payload, :func:`shared_texted` of it); kept while the payload
is (so its ``id`` is not reused while it is kept)."""

_PARSED: dict[str, Any] = {}
"""By a tool's name: the ``parsed`` payload (with its text, :func:`texted_as`) of a call naming it
without an id, going to a SQLite trace store; one object for all such calls, as the shared payloads
are (a recorded payload is never changed afterwards)."""

_LEDGER_OBSERVATION: dict[str, Any] = Observation(call_id="", tool="").to_dict()
"""``Observation.to_dict()`` of an observation of defaults: its keys in their order (the
ledger's JSON of an observation is written in that order)."""
_SOURCE = Provenance().source
_SOURCE_TEXT = _quote(_SOURCE)
_encoded = Encoded


def prepared(taken: Taken, rec: Recorder, raw: ToolCall, node_id: str | None) -> tuple[Ready, str]:
    """The stages' events of a call :func:`admitted` took, recorded in ``rec``, and (its Ready
    call, as ``ready_effect`` makes it, the arguments' digest)."""
    _, run, entry, verdict, text, digest, texted = taken
    records, seq = rec.records, run.seq  # Recorder.add, written out for the stages' events
    name, args, given_id = raw.name, raw.arguments, raw.id
    parsed = _PARSED.get(name) if texted and given_id is None else None
    if parsed is None:
        parsed = {"format": "toolcall", "calls": ({"name": name, "id": given_id},)}
        if texted:  # texted_as, written out
            call = f'[{{"name": {_quote(name)}, "id": {"null" if given_id is None else _quote(given_id)}}}]'
            written = f'{{"format": "toolcall", "calls": {call}}}'
            if written.isascii() and len(written) <= MAX_EVENT_CHARS:
                parsed = _texted(parsed)
                parsed.text = written
            if given_id is None:  # the same payload for every call of the name without an id
                if len(_PARSED) >= 4096:
                    _PARSED.clear()
                _PARSED[name] = parsed
    records.append((next(seq), "parsed", _time(), None, parsed))
    node = node_id or f"n{next(run.nodes)}"
    call_id = given_id or f"{run.run_id}:{node}"
    rec.call_id = call_id
    shape = entry.shape
    authorized, validated = shape.authorized, shape.validated
    if texted:  # each call of the tool records these objects: their texts made once (shared_texted)
        hit = _SHARED.get(id(authorized))
        authorized = hit[1] if hit is not None and hit[0] is authorized else shared_texted(authorized)
        hit = _SHARED.get(id(validated))
        validated = hit[1] if hit is not None and hit[0] is validated else shared_texted(validated)
    records.append((next(seq), "authorized", _time(), call_id, authorized))
    records.append((next(seq), "validated", _time(), call_id, validated))
    spec = entry.spec
    spec_key = spec._key  # ToolSpec.key's own value, read without the property's call
    if node_id is None:  # the identity node of the message's first such call
        node = node_named(run.turn, spec_key, digest, 1)
    elif text is None:
        digest = args_digest(args)
    if verdict[2] is not None:
        checked = verdict[2]
        if texted:
            hit = _SHARED.get(id(checked))
            checked = hit[1] if hit is not None and hit[0] is checked else shared_texted(checked)
        records.append((next(seq), "flow_checked", _time(), call_id, checked))
    label = verdict[3]
    run.flow.pending[call_id] = label
    run_id, key = run.run_id, None  # _key, written out
    if text is not None:
        head = f'["{run_id}","{node}","{spec_key}",'
        if head.isascii() and head.isprintable() and head.count('"') == 6 and "\\" not in head:
            key = f"as1_{_sha256(b''.join((head.encode(), text, b']'))).hexdigest()[:32]}"
    if key is None:
        key = idempotency_key(run_id, node, spec_key, args)
    kwargs = {**args, "idempotency_key": key} if spec._takes_key else args
    return Ready(entry.compiled, call_id, node, args, kwargs, key, None, label), digest


def intent_entry(ready: Ready, run_id: str, tool_key: str, digest: str) -> LedgerEntry:
    """ledger/_intent.py ``new_entry(..., dispatched=True)`` of ``ready`` (its entry as the intent
    writes it: ``dispatched``, one attempt), its slots set as ``LedgerEntry.evolve`` sets them
    rather than through the frozen ``__init__``'s ``object.__setattr__`` calls."""
    entry: LedgerEntry = _new(LedgerEntry)
    _key_of(entry, ready.key)
    _run_of(entry, run_id)
    _node_of(entry, ready.node_id)
    _tool_of(entry, tool_key)
    _digest_of(entry, digest)
    _arguments_of(entry, dict(ready.arguments))
    _state_of(entry, "dispatched")
    _attempts_of(entry, 1)
    _created_of(entry, _time())  # each from its own clock read, as the fields' default factories
    _updated_of(entry, _time())
    _remote_of(entry, None)
    _observation_of(entry, None)
    _error_of(entry, None)
    _resolution_of(entry, None)
    return entry


def int_observation(
    ready: Ready, value: int, rec: Recorder, verdict: Verdict, head: str | None
) -> tuple[Observation, dict[str, Any]]:
    """What ``observe_write`` makes of an ``int`` result of one attempt (pipeline/_run.py ``tail``
    too: the int's repr is its canonical text), its ``observation`` event recorded, and the
    observation as ``Observation.to_dict`` writes it for the ledger. ``head``: the event's text
    up to its digest (:func:`tool_heads`) when its text is made beside it, else None."""
    digest = _INT_DIGESTS.get(value)
    if digest is None:
        if len(_INT_DIGESTS) >= _INT_MEMO:
            _INT_DIGESTS.clear()
        digest = _INT_DIGESTS[value] = _sha256(int.__repr__(value).encode()).hexdigest()
    label, tags = verdict[3], verdict[4][2]
    spec, call_id = ready.compiled.spec, ready.call_id
    now = _time()
    provenance = _new(Provenance)
    provenance.__dict__.update(fetched_at=now, resource_version=None, trust=label.integrity, labels=tags)
    diagnostics = {"idempotency_key": ready.key}
    obs = _new(Observation)  # every field is already checked, as observe() does
    obs.__dict__.update(
        call_id=call_id,
        tool=spec.name,
        tool_version=spec.version,
        data=value,
        content_hash=digest,
        provenance=provenance,
        diagnostics=diagnostics,
    )
    observed = {"status": "ok", "tool": spec.name, "version": spec.version, "content_hash": digest}
    if head is not None:  # ASCII and short (tool_heads), as the digest is
        observed = _texted(observed)
        observed.text = f'{head}"{digest}"}}'
    rec.records.append((next(rec.run.seq), "observation", now, call_id, observed))  # rec.add's
    stored = _LEDGER_OBSERVATION.copy()  # Observation.to_dict, its keys in their order
    stored["call_id"], stored["tool"], stored["tool_version"] = call_id, spec.name, spec.version
    stored["data"], stored["effects"], stored["diagnostics"] = value, [], dict(diagnostics)
    stored["content_hash"], stored["items"] = digest, []
    stored["provenance"] = {
        "source": _SOURCE,
        "fetched_at": now,
        "resource_version": None,
        "trust": label.integrity,
        "labels": list(tags),
    }
    # Over a SQLite trace store (``head``; ``sqlite:///`` keeps the ledger in its file) the ledger's
    # JSON made here too, not encoded again by the outcome's write (ledger.entries.Encoded)
    if head is not None and _TEXTS_OBSERVATION:
        text = _observation_text(call_id, spec.name, spec.version, value, ready.key, digest, now, label, tags)
        if text is not None:
            stored = _encoded(stored)
            stored.text = text
    return obs, stored


def _observation_text(
    call_id: str,
    tool: str,
    version: Any,
    value: int,
    key: Any,
    digest: str,
    now: float,
    label: Any,
    tags: Any,
) -> str | None:
    """``strict_dumps`` of the ledger's observation :func:`int_observation` makes, written from
    its parts (as the C encoder writes a text, an int and a float); None unless it is ASCII with
    every part a text where the encoder would quote one (then the store encodes it itself)."""
    trust = label.integrity
    if type(version) is not str or type(key) is not str or type(trust) is not str:
        return None
    hit = _LABELS.get(id(tags))
    labels = hit[1] if hit is not None and hit[0] is tags else _labels_text(tags)
    if labels is None:
        return None
    text = (
        f'{{"call_id": {_quote(call_id)}, "tool": {_quote(tool)}, "tool_version": {_quote(version)}, '
        f'"status": "ok", "data": {int.__repr__(value)}, "effects": [], "error": null, '
        f'"diagnostics": {{"idempotency_key": {_quote(key)}}}, "artifact_ref": null, "complete": true, '
        f'"cursor": null, "total": null, "content_hash": "{digest}", "provenance": {{"source": '
        f'{_SOURCE_TEXT}, "fetched_at": {float.__repr__(now)}, "resource_version": null, "trust": '
        f'{_quote(trust)}, "labels": [{labels}]}}, "trimming": null, '
        '"provisional": false, "items": []}'
    )
    return text if text.isascii() else None


_LABELS: dict[int, tuple[Any, str | None]] = {}
"""By a tuple of labels' ``id``: (the tuple, :func:`_labels_text` of it); kept while the tuple is
(one per run label: a flow verdict's output holds it), so its ``id`` is not reused meanwhile."""


def _labels_text(tags: Any) -> str | None:
    """The text between the brackets of an observation's ``labels`` as the C encoder writes it;
    None when a label is not a ``str``. Kept by :data:`_LABELS` for a tuple (never changed)."""
    text = ", ".join([_quote(tag) for tag in tags]) if all([type(tag) is str for tag in tags]) else None
    if type(tags) is tuple:
        if len(_LABELS) >= 4096:
            _LABELS.clear()
        _LABELS[id(tags)] = (tags, text)
    return text


def _texts_observation() -> bool:
    """Whether :func:`_observation_text` writes what ``strict_dumps`` writes of the observation
    ``int_observation`` makes (the envelope's fields and their defaults as written there)."""

    class _Label:
        integrity = "trusted"

    stored = _LEDGER_OBSERVATION.copy()
    stored["call_id"], stored["tool"], stored["tool_version"] = "r:n", "t", "1"
    stored["data"], stored["effects"], stored["diagnostics"] = -7, [], {"idempotency_key": "as1_0"}
    stored["content_hash"], stored["items"] = "ab", []
    stored["provenance"] = {
        "source": _SOURCE,
        "fetched_at": 1.5,
        "resource_version": None,
        "trust": "trusted",
        "labels": ["internal", "x"],
    }
    made = _observation_text("r:n", "t", "1", -7, "as1_0", "ab", 1.5, _Label(), ("internal", "x"))
    return made is not None and made == strict_dumps(stored)


def committed(
    ledger: LedgerStore,
    entry: LedgerEntry,
    obs: Observation,
    stored: dict[str, Any],
    rec: Recorder,
    texted: bool,
) -> Observation:
    """ledger/commit.py ``_commit`` of a new action's first send, which succeeded (its entry
    ``dispatched``, one attempt), with its ``_Ledger.move``; ``stored``: ``obs.to_dict()``. Its
    ``ledger`` event goes into ``rec`` (the call has not ended: ``CallRecord``'s course)."""
    new: LedgerEntry = _new(LedgerEntry)  # entry.evolve(state=, observation=, remote_id=, error=None)
    _key_of(new, entry.key)  # the fields the commit keeps
    _run_of(new, entry.run_id)
    _node_of(new, entry.node_id)
    _tool_of(new, entry.tool)
    _digest_of(new, entry.args_digest)
    _arguments_of(new, entry.arguments)
    _attempts_of(new, entry.attempts)
    _created_of(new, entry.created_at)
    _resolution_of(new, entry.resolution)
    _state_of(new, "committed")
    _updated_of(new, _time())
    _observation_of(new, stored)
    _remote_of(new, obs.diagnostics.get("remote_id"))
    _error_of(new, None)
    key = entry.key
    records, seq = rec.records, rec.run.seq
    try:
        stored_entry = ledger.transition(key, _COMMITTABLE, new)
    except Exception as exc:  # the outcome is known and the store did not take it: kept here
        _hold_unrecorded(ledger, new)
        why = f"{type(exc).__name__}: {said(exc)[:200]}"
        moved = {"key": key, "from": entry.state, "to": "committed", "attempts": new.attempts}
        unrecorded = {**moved, "recorded": False, "error": why}
        records.append((next(seq), "ledger", _time(), rec.call_id, unrecorded))
    else:
        if stored_entry is None:  # someone settled it meanwhile (a recover elsewhere): the stored outcome
            current = ledger.get(key)
            if current is not None and current.state == "committed" and current.observation is not None:
                return Observation.from_dict(current.observation)
        else:
            attempts = stored_entry.attempts
            moved = {"key": key, "from": entry.state, "to": "committed", "attempts": attempts}
            if texted and type(attempts) is int:  # the key is ASCII (as1_ and hex), the state a name
                text = f'{{"key": {_quote(key)}, "from": {_quote(entry.state)}, "to": "committed", '
                moved = _texted(moved)
                moved.text = f'{text}"attempts": {int.__repr__(attempts)}}}'
            records.append((next(seq), "ledger", _time(), rec.call_id, moved))
    if _crash._target is not None:
        point("after_ledger_commit")
    return obs


def tool_heads(spec: Any) -> tuple[str, str] | None:
    """The texts ``encode_data`` writes for a tool's ``dispatched`` payload up to its node id's
    text, and for its ``observation`` payload of an ``int`` up to its digest's, made once per tool
    spec; None when either is not ASCII (its payloads are then encoded by the store)."""
    hit = _TOOL_HEADS.get(id(spec))
    if hit is not None and hit[0] is spec:
        return hit[1]
    name, version = _quote(spec.name), _text(spec.version)
    dispatched = f'{{"tool": {name}, "version": {version}, "node_id": '
    observed = f'{{"status": "ok", "tool": {name}, "version": {version}, "content_hash": '
    if not (dispatched.isascii() and observed.isascii()) or len(dispatched) > MAX_EVENT_CHARS // 2:
        return None
    if len(_TOOL_HEADS) >= 4096:
        _TOOL_HEADS.clear()
    _TOOL_HEADS[id(spec)] = (spec, (dispatched, observed))
    return dispatched, observed


def shared_texted(payload: Any) -> Any:
    """``payload`` (one every call of a tool records: its ``authorized``, ``validated`` or
    ``flow_checked``, one object per tool or per run label) as a
    :class:`~actionspace.trace.store_encoding.Texted` copy holding the text ``encode_data`` writes
    for it, made once per object and kept; the payload itself when it is not a ``dict`` (another
    mapping may read differently each time), cannot be encoded, or its text is not one a ``Texted``
    holds (the SQLite store then encodes it, as before). A recorded payload is never changed
    afterwards, so its text stays its own (the store's ``PayloadTexts`` keeps texts so too)."""
    hit = _SHARED.get(id(payload))
    if hit is not None and hit[0] is payload:
        return hit[1]
    out = payload
    if type(payload) is dict:
        try:
            text = encode_data(payload)
        except (ValueError, TypeError):  # the store encodes it, and raises, as it would have
            text = ""
        if text and text.isascii() and len(text) <= MAX_EVENT_CHARS:
            out = _texted(payload)
            out.text = text
    if len(_SHARED) >= 4096:
        _SHARED.clear()
    _SHARED[id(payload)] = (payload, out)
    return out


def texted_as(data: dict[str, Any], text: str) -> dict[str, Any]:
    """``data`` as a :class:`~actionspace.trace.store_encoding.Texted` payload whose text is
    ``text`` (what ``encode_data`` writes for it, made by the caller from the payload's shape;
    ``tests/pipeline/test_w20_write_frames.py`` holds them equal), or ``data`` itself when that
    text is not ASCII or too long to be written whole (``encode_data`` then writes it)."""
    if not text.isascii() or len(text) > MAX_EVENT_CHARS:
        return data
    out = Texted(data)
    out.text = text
    return out


def _text(value: str | int | None) -> str:
    """The JSON of a text, an ``int`` or None, as ``encode_data`` writes it."""
    if value is None:
        return "null"
    return _quote(value) if type(value) is str else int.__repr__(value)


def _digested(args: dict[str, Any]) -> tuple[bytes | None, str]:
    """(the text :func:`~actionspace.ledger.keys.args_digest` hashes, that digest) when the text
    is ASCII RFC 8785 (no string to bring to NFC, no integer beyond its domain's other form);
    else (None, "") and the ledger's own functions read the arguments. Arguments whose keys are
    each a ``str`` and whose values are each exactly a string, an integer within ±(2**53 − 1), a
    boolean or None are written by the C encoder as RFC 8785 writes them (what
    ``canonical_json`` checks first, value by value), without that check's calls."""
    flat = _chunks is not None and len(args) <= _FLAT_ITEMS
    for name, value in args.items():
        kind = type(value)
        if type(name) is not str or kind not in _FLAT or (kind is int and not -_SAFE <= value <= _SAFE):
            flat = False
            break
    try:
        # dumps_plain's encoder, called directly: such arguments are what its check lets through
        text = _join(_chunks(args, 0)).encode() if flat else digest_json(args)  # type: ignore[misc]
    except (ValueError, TypeError):  # what the ledger's own functions refuse as they refuse it
        return None, ""
    if text.isascii() and text[:1] != b"x":
        return text, _sha256(text).hexdigest()
    return None, ""


def _key(run_id: str, node: str, tool_key: str, args: dict[str, Any], text: bytes | None) -> str:
    """:func:`~actionspace.ledger.keys.idempotency_key`, from the arguments' text when
    :func:`_digested` gave it: RFC 8785 writes an array as its members' texts, comma-separated,
    and a printable ASCII string without a quote or backslash as itself between quotes."""
    if text is not None:
        head = f'["{run_id}","{node}","{tool_key}",'
        if head.isascii() and head.isprintable() and head.count('"') == 6 and "\\" not in head:
            return f"as1_{_sha256(b''.join((head.encode(), text, b']'))).hexdigest()[:32]}"
    return idempotency_key(run_id, node, tool_key, args)


_TEXTS_OBSERVATION = _texts_observation()
