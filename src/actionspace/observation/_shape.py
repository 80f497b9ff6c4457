"""``shape``: a tool result in, a bounded observation ``data`` out (DESIGN §5)."""

from __future__ import annotations

import codecs
import json
import logging
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from hashlib import sha256
from itertools import chain
from json.encoder import encode_basestring
from typing import Any, Final

from actionspace._canonical import canonical_text, dumps_plain, normalize, normalize_checked
from actionspace._json_values import whole_json
from actionspace.errors import ConfigurationError
from actionspace.observation._artifacts import ArtifactStore
from actionspace.observation.rules import MIN_MAX_BYTES, RULES, JsonRule, Source, TrimRule
from actionspace.observation.rules._base import TextSource, is_stream
from actionspace.observation.rules.json import fit_text, project
from actionspace.types import Trimming

__all__ = ["Shaped", "shape"]

SLICE_CHARS: Final = 1 << 20
"""Text is handed to a rule in pieces of at most this many characters (or bytes)."""
SPILL_BYTES: Final = 256 * 1024
"""Raw text held in memory before it starts streaming into the artifact store."""
_PARSE_LIMIT: Final = 64 << 20
_CHUNK_CHARS: Final = 1 << 16
_log = logging.getLogger("actionspace.observation")


@dataclass(frozen=True, slots=True, kw_only=True)
class Shaped:
    """A shaped tool result: what goes into ``Observation.data`` and its envelope fields."""

    data: Any
    """The projection the model sees; plain JSON of at most ``max_bytes`` bytes (canonical)."""
    trimming: Trimming | None
    """Which rule ran and how much it kept; None only when nothing was cut and no rule ran."""
    complete: bool
    """False whenever anything was cut."""
    artifact_ref: str | None
    """``artifact://sha256/<hex>`` of the full raw output when something was cut (or always with
    ``keep_raw``) and a store was given; None otherwise."""
    content_hash: str
    """sha256 hex of the canonical JSON of ``data`` (see ``_canonical`` for the canonical form)."""
    not_stored: str | None = None
    """Why the full raw output has no ``artifact_ref`` although one was due (something was cut, or
    ``keep_raw``): ``"no artifact store"``, or the store's failure (a full disk); None otherwise."""


_set_data = Shaped.__dict__["data"].__set__
_set_trimming = Shaped.__dict__["trimming"].__set__
_set_complete = Shaped.__dict__["complete"].__set__
_set_ref = Shaped.__dict__["artifact_ref"].__set__
_set_hash = Shaped.__dict__["content_hash"].__set__
_set_not_stored = Shaped.__dict__["not_stored"].__set__
_new = object.__new__


def _unchanged(data: Any, digest: str) -> Shaped:
    # The per-call path: the generated frozen __init__ costs more than the rest of shape().
    shaped: Shaped = _new(Shaped)
    _set_data(shaped, data)
    _set_trimming(shaped, None)
    _set_complete(shaped, True)
    _set_ref(shaped, None)
    _set_hash(shaped, digest)
    _set_not_stored(shaped, None)
    return shaped


def shape(
    value: object,
    *,
    rule: str = "json-v1",
    max_bytes: int = 16_384,
    artifacts: ArtifactStore | None = None,
    keep_raw: bool = False,
) -> Shaped:
    """Project a tool result into bounded observation data with the trimming rule ``rule``.

    ``value`` is any JSON-able value (pydantic models, dataclasses and other objects are
    normalized), ``bytes``, or an iterator of ``str`` / ``bytes`` chunks, which is consumed once,
    in bounded memory, while its raw bytes stream into ``artifacts``. A rule that does not
    recognise the value's shape (say ``log-v1`` given a dict without output) leaves it to
    ``json-v1``. ``max_bytes`` bounds the canonical JSON of ``data`` (at least 256).

    Raises ``ConfigurationError`` for an unknown rule, a budget under 256 bytes, or ``keep_raw``
    without a store. Exceptions raised by a streamed iterator propagate unchanged.
    """
    if rule == "json-v1" and not keep_raw and max_bytes >= MIN_MAX_BYTES:
        plain: Any = value
        kind = type(plain)
        text: str | None = None
        try:
            if kind is int:
                text = int.__repr__(plain)
            elif kind is str:
                if len(plain) <= max_bytes:
                    text = encode_basestring(plain)
            elif plain is None:
                text = "null"
            elif kind is bool:
                text = "true" if plain else "false"
            elif kind is float:
                if plain - plain == 0.0:
                    text = float.__repr__(plain or 0.0)  # -0.0 writes as 0.0, as dumps_plain has it
            elif kind is dict or kind is list:
                text = dumps_plain(plain)
                if len(text) <= MEMO_CHARS:
                    digest = _digests.get(text)
                    if digest is not None:
                        return _unchanged(plain, digest)
            if text is not None and len(text) <= max_bytes:
                if kind is not dict and kind is not list:
                    known = _scalars.get(text)
                    if known is not None:
                        return known
                raw = text.encode()
                if len(raw) <= max_bytes:
                    return _remember(text, plain, sha256(raw).hexdigest(), kind is dict or kind is list)
        except (TypeError, ValueError, RecursionError):  # UnicodeEncodeError is a ValueError
            text = None
        return _shape(value, rule, max_bytes, artifacts, keep_raw, text)
    return _shape(value, rule, max_bytes, artifacts, keep_raw, None)


MEMO_CHARS: Final = 128
"""Canonical texts up to this length have their digest (and, for scalars, their whole ``Shaped``)
memoized: most tool calls return the same few small values (``true``, ``{"ok":true}``)."""
_MEMO_ENTRIES: Final = 4096
_digests: dict[str, str] = {}
_scalars: dict[str, Shaped] = {}


def _remember(text: str, plain: Any, digest: str, mutable: bool) -> Shaped:
    shaped: Shaped = _new(Shaped)  # _unchanged(plain, digest), without a call of its own
    _set_data(shaped, plain)
    _set_trimming(shaped, None)
    _set_complete(shaped, True)
    _set_ref(shaped, None)
    _set_hash(shaped, digest)
    _set_not_stored(shaped, None)
    if len(text) <= MEMO_CHARS:
        memo: dict[str, Any] = _digests if mutable else _scalars
        if len(memo) >= _MEMO_ENTRIES:
            memo.clear()
        memo[text] = digest if mutable else shaped
    return shaped


def _shape(
    value: object,
    rule: str,
    max_bytes: int,
    artifacts: ArtifactStore | None,
    keep_raw: bool,
    text: str | None,
) -> Shaped:
    if max_bytes < MIN_MAX_BYTES:
        raise ConfigurationError(f"max_bytes must be at least {MIN_MAX_BYTES}, got {max_bytes}")
    if keep_raw and artifacts is None:
        raise ConfigurationError("keep_raw=True needs an artifact store")
    chosen = RULES.get(rule)
    if chosen is None:
        raise ConfigurationError(f"unknown trimming rule {rule!r}; known: {', '.join(sorted(RULES))}")
    if chosen is not JsonRule:
        source = chosen.unwrap(value)
        if source is not None:
            return _run(chosen, source, max_bytes, artifacts, keep_raw)
    return _shape_json(value, max_bytes, artifacts, keep_raw, text)


def _shape_json(
    value: object, max_bytes: int, artifacts: ArtifactStore | None, keep_raw: bool, text: str | None
) -> Shaped:
    raw: bytes | None = None
    if is_stream(value):
        return _run(JsonRule, Source(text=value), max_bytes, artifacts, keep_raw)  # type: ignore[arg-type]
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        parsed = _parse(raw)
        if parsed is _NOT_JSON:
            return _run(JsonRule, Source(text=raw), max_bytes, artifacts, keep_raw)
        value = parsed
    given = raw
    plain, deep = (value, False) if text is not None else normalize_checked(value)
    normalized = text is None
    pieces: Iterable[str]
    if normalized and type(plain) is str and len(plain) > max_bytes:
        # a long text: its head and tail are shown, its quoted form streams to the store in slices
        data: Any = fit_text(plain[:max_bytes], plain[-max_bytes:], len(plain), max_bytes)
        kept = dumps_plain(data).encode("utf-8", "surrogatepass")
        pieces = whole_json(plain)
    else:
        text = text if text is not None else dumps_plain(plain)
        canonical = text.encode("utf-8", "surrogatepass") if len(text) <= max_bytes else None
        if canonical is not None and len(canonical) <= max_bytes:
            if not deep:
                ref, unstored = (
                    _put(artifacts, canonical if given is None else given) if keep_raw else _NOT_PUT
                )
                digest = sha256(canonical).hexdigest()
                return Shaped(
                    data=plain,
                    trimming=None,
                    complete=True,
                    artifact_ref=ref,
                    content_hash=digest,
                    not_stored=unstored,
                )
            data, kept = plain, canonical  # nesting (or an integer) cut by normalize: kept as it is
        else:
            # ``plain`` is normalized already, or (``text`` given) one the C encoder wrote:
            # normalized only where the projection reads it
            data = project(plain, max_bytes, normalized=normalized)
            kept = dumps_plain(data).encode("utf-8", "surrogatepass")
        pieces = (text,)
    if given is not None:
        (ref, unstored), original = _put(artifacts, given), len(given)
    else:  # what normalize cut is written anew, whole; the rest is the canonical text
        ref, original, unstored = _put_text(artifacts, whole_json(value) if deep else pieces)
    trimming = Trimming(
        rule=JsonRule.name, rule_version=JsonRule.version, original_bytes=original, kept_bytes=len(kept)
    )
    digest = sha256(kept).hexdigest()
    return Shaped(
        data=data,
        trimming=trimming,
        complete=False,
        artifact_ref=ref,
        content_hash=digest,
        not_stored=unstored,
    )


def _put_text(artifacts: ArtifactStore | None, pieces: Iterable[str]) -> tuple[str | None, int, str | None]:
    """The text of ``pieces`` stored in ``artifacts`` as UTF-8, its size in bytes (counted
    without a store, or when the store fails), and why it was not stored. Up to ``SPILL_BYTES`` go
    in with one ``put``; a longer text streams through ``put_stream``, never encoded whole."""
    size = [0]
    chunks = _encoded(pieces, size)
    held: list[bytes] = []
    for chunk in chunks:
        held.append(chunk)
        if size[0] > SPILL_BYTES:
            break
    ref: str | None = None
    unstored: str | None = _NO_STORE
    if artifacts is not None:
        try:
            if size[0] <= SPILL_BYTES:
                ref = artifacts.put(b"".join(held))
            else:
                ref = artifacts.put_stream(chain(held, chunks))
            unstored = None
        except OSError as exc:
            unstored = _failed(exc)
    for _ in chunks:  # no store, or one that failed midway: the size is still of the whole
        pass
    return ref, size[0], unstored


def _encoded(pieces: Iterable[str], size: list[int]) -> Iterator[bytes]:
    held: list[str] = []
    count = 0
    for piece in pieces:
        for start in range(0, len(piece), _CHUNK_CHARS):
            part = piece if len(piece) <= _CHUNK_CHARS else piece[start : start + _CHUNK_CHARS]
            held.append(part)
            count += len(part)
            if count >= _CHUNK_CHARS:
                raw = "".join(held).encode("utf-8", "surrogatepass")
                held, count = [], 0
                size[0] += len(raw)
                yield raw
    if held:
        raw = "".join(held).encode("utf-8", "surrogatepass")
        size[0] += len(raw)
        yield raw


_NO_STORE: Final = "no artifact store"
_NOT_PUT: Final = (None, None)


def _put(artifacts: ArtifactStore | None, data: bytes) -> tuple[str | None, str | None]:
    """``data`` stored in ``artifacts``: its reference, or None and why not (no store, or the store
    failed: a full disk, a read-only folder); the observation then carries no ``artifact_ref``
    rather than failing."""
    if artifacts is None:
        return None, _NO_STORE
    try:
        return artifacts.put(data), None
    except OSError as exc:
        return None, _failed(exc)


def _failed(exc: OSError) -> str:
    """Why a store failed, logged in full; the text names no path of the store's."""
    _log.warning("actionspace: a trimmed output was not stored", exc_info=True)
    reason = os.strerror(exc.errno) if type(exc.errno) is int else type(exc).__name__
    return f"the artifact store failed ({reason})"


_NOT_JSON: Final = object()


def _parse(raw: bytes) -> Any:
    """``raw`` parsed as JSON when it is an object or array, else ``_NOT_JSON``."""
    start = raw[:64].lstrip()
    if len(raw) > _PARSE_LIMIT or not start.startswith((b"{", b"[")):
        return _NOT_JSON
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return _NOT_JSON


def _run(
    rule: type[TrimRule], source: Source, max_bytes: int, artifacts: ArtifactStore | None, keep_raw: bool
) -> Shaped:
    trimmer = rule(max_bytes=max_bytes, fields=source.fields)
    ref = failed = None
    if source.items is not None:
        for item in source.items:
            trimmer.feed_item(item)
        items = canonical_text(source.items).encode("utf-8", "surrogatepass")
        held: bytes | None = items
        original = len(items)
    else:
        pump = _Pump(trimmer, artifacts)
        pump.run(source.text if source.text is not None else "")
        original, ref, failed = pump.size, pump.ref, pump.failed
        held = b"".join(pump.held) if pump.held is not None else None
    data, cut = trimmer.finish()
    kept = dumps_plain(data).encode("utf-8", "surrogatepass")
    if len(kept) > max_bytes:  # a rule overran its budget: never let that reach the model
        data, cut = project(normalize(data), max_bytes), True
        kept = dumps_plain(data).encode("utf-8", "surrogatepass")
    unstored = _NO_STORE if cut and artifacts is None else None
    if artifacts is not None and (cut or keep_raw):
        if ref is None and held is not None:
            ref, unstored = _put(artifacts, held)
        elif ref is None:
            unstored = failed
    else:
        ref = None
    trimming = None
    if cut or rule is not JsonRule:
        trimming = Trimming(
            rule=rule.name, rule_version=rule.version, original_bytes=original, kept_bytes=len(kept)
        )
    digest = sha256(kept).hexdigest()
    return Shaped(
        data=data,
        trimming=trimming,
        complete=not cut,
        artifact_ref=ref,
        content_hash=digest,
        not_stored=unstored,
    )


class _Pump:
    """Feeds text to a rule piece by piece while counting its bytes and teeing them to a store.

    Up to ``SPILL_BYTES`` are held in memory (a short output that turns out uncut is never
    stored); beyond that the rest streams through ``ArtifactStore.put_stream``.
    """

    def __init__(self, rule: TrimRule, store: ArtifactStore | None) -> None:
        self._rule = rule
        self._store = store
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._pending_bytes = False
        self.size = 0
        self.held: list[bytes] | None = [] if store is not None else None
        self.ref: str | None = None
        self.failed: str | None = None

    def run(self, text: TextSource) -> None:
        pieces = self._pieces(text)
        held_size = 0
        for raw in pieces:
            if self.held is None or self._store is None:
                continue
            self.held.append(raw)
            held_size += len(raw)
            if held_size > SPILL_BYTES:
                held, self.held = self.held, None
                try:
                    self.ref = self._store.put_stream(chain(held, pieces))
                except OSError as exc:  # the rule still reads every piece; the observation has no artifact
                    self.failed = _failed(exc)
                    for _ in pieces:
                        pass
                break
        self._flush_decoder()

    def _pieces(self, text: TextSource) -> Iterator[bytes]:
        chunks: Iterable[Any] = (text,) if isinstance(text, str | bytes | bytearray | memoryview) else text
        for chunk in chunks:
            if isinstance(chunk, bytes | bytearray | memoryview):
                view = memoryview(chunk).cast("B")
                for start in range(0, len(view), SLICE_CHARS):
                    raw = bytes(view[start : start + SLICE_CHARS])
                    self._pending_bytes = True
                    self._feed(self._decoder.decode(raw))
                    self.size += len(raw)
                    yield raw
                continue
            if not isinstance(chunk, str):
                chunk = canonical_text(chunk) + "\n"
            self._flush_decoder()
            for start in range(0, len(chunk), SLICE_CHARS):
                part = chunk if len(chunk) <= SLICE_CHARS else chunk[start : start + SLICE_CHARS]
                self._feed(part)
                raw = part.encode("utf-8", "surrogatepass")
                self.size += len(raw)
                yield raw

    def _feed(self, text: str) -> None:
        if text:
            self._rule.feed(text)

    def _flush_decoder(self) -> None:
        if self._pending_bytes:
            self._pending_bytes = False
            self._feed(self._decoder.decode(b"", final=True))
