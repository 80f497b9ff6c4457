"""Content codings of the MCP client's HTTP answers, undone here rather than by the HTTP library.

``gzip`` (several members too, zero padding between them skipped), ``deflate`` and ``identity`` are
inflated in pieces of at most :data:`PIECE_BYTES` as the body is read, so a bomb never holds more
than its reader's bound and a piece. A body in any other coding (which the library would pass on as
if it were plain), or whose compressed stream is broken or cut short, fails its read with
:class:`Undecodable`.

An event stream's bytes are UTF-8, whatever charset its content type names (the SSE format knows no
other); httpx2 decodes them in that charset, with a replacement character for every byte it cannot
take, so an answer that was not UTF-8 would be taken as a result holding ``U+FFFD`` where the server's
bytes were. Here an event stream is read as UTF-8 only, and a byte that is not ends its read with
:class:`Undecodable` (the answer is malformed), as a JSON body that is not UTF-8 does.

``deflate`` is a zlib stream (RFC 9110), but servers send raw deflate data under that name too, and
about 1 raw stream in 500 starts with two bytes that pass for a zlib header. So both readings are
tried on the same bytes, as browsers do, and what they inflate is held back until one of them fails
(a zlib stream read as raw fails within its first bytes), the body ends, or a reading holds more
than :data:`_TRIAL_BYTES`; then the zlib reading is kept while it lasts.
"""

from __future__ import annotations

import codecs
import zlib
from collections.abc import AsyncIterator, Iterator
from typing import Final

import httpx2

__all__ = ["ACCEPTED_CODINGS", "PIECE_BYTES", "Inflating", "Refused", "Undecodable", "take_codings"]

PIECE_BYTES: Final = 64 * 1024
"""Most bytes one inflating step yields, whatever a network chunk inflates to."""
_GZIP: Final = 16 + zlib.MAX_WBITS
_WBITS: Final = {"gzip": _GZIP, "x-gzip": _GZIP, "deflate": zlib.MAX_WBITS}
"""The content codings undone here (``identity`` is none), as ``zlib`` window bits."""
_MAX_CODINGS: Final = 3
"""Most content codings one body may name (one is usual; each more is another inflater)."""
_TRIAL_BYTES: Final = 256 * 1024
"""``deflate``: most bytes a reading holds back while both a zlib and a raw reading are still open."""
ACCEPTED_CODINGS: Final = "gzip, deflate"
"""What every request offers in ``Accept-Encoding``: the codings undone here."""


class Undecodable(httpx2.DecodingError):
    """A body in a coding not undone here, or whose compressed stream is broken or cut short."""


class _Inflater:
    """One compressed stream undone incrementally; ``zlib`` is never asked for more than a piece at once."""

    def __init__(self, coding: str, wbits: int) -> None:
        self._coding = coding
        self._wbits = wbits
        self._z = zlib.decompressobj(wbits)
        self._started = False
        self._ended = False

    def feed(self, data: bytes) -> Iterator[bytes]:
        self._started = self._started or bool(data)
        while data or (self._started and not self._ended):
            if self._ended:
                if self._wbits != _GZIP:
                    raise Undecodable(f"bytes after the end of the {self._coding} stream")
                data = data.lstrip(b"\0")  # gzip: another member may follow; zero padding is skipped
                if not data:
                    return
                self._z, self._ended = zlib.decompressobj(self._wbits), False
            while True:
                out = self._step(data)
                data = self._z.unconsumed_tail
                if out:
                    yield out
                if self._z.eof:
                    self._ended, data = True, self._z.unused_data
                    break
                if not data and len(out) < PIECE_BYTES:
                    return

    def _step(self, data: bytes) -> bytes:
        try:
            return self._z.decompress(data, PIECE_BYTES)
        except zlib.error as exc:
            raise Undecodable(f"a broken {self._coding} stream ({exc})") from exc

    def finish(self) -> Iterator[bytes]:
        """What is still held back (nothing); raises :class:`Undecodable` for a stream cut short."""
        if self._started and not self._ended:
            raise Undecodable(f"the {self._coding} stream ended early")
        return iter(())


class _Deflate:
    """``deflate`` undone, as a zlib stream or as raw deflate data (see the module docstring)."""

    def __init__(self) -> None:
        zlib_reading = _Inflater("deflate", zlib.MAX_WBITS)
        raw_reading = _Inflater("deflate", -zlib.MAX_WBITS)
        self._held: dict[_Inflater, bytearray] = {zlib_reading: bytearray(), raw_reading: bytearray()}
        """The readings still open, the zlib one first, each with what it inflated so far."""
        self._kept: _Inflater | None = None

    def feed(self, data: bytes) -> Iterator[bytes]:
        if self._kept is not None:
            yield from self._kept.feed(data)
            return
        rests: dict[_Inflater, Iterator[bytes]] = {}
        failure: Undecodable | None = None
        for reading, held in list(self._held.items()):
            pieces = reading.feed(data)
            try:
                for piece in pieces:
                    held += piece
                    if len(held) > _TRIAL_BYTES:
                        rests[reading] = pieces  # the rest is inflated only once this reading is kept
                        break
            except Undecodable as exc:
                del self._held[reading]
                failure = exc
        if not self._held:
            assert failure is not None
            raise failure
        if len(self._held) == 1 or rests:
            kept = next(iter(self._held))
            yield from self._keep(kept)
            yield from rests.get(kept, iter(()))

    def _keep(self, reading: _Inflater) -> Iterator[bytes]:
        self._kept, held = reading, self._held[reading]
        self._held = {}
        return (bytes(held[at : at + PIECE_BYTES]) for at in range(0, len(held), PIECE_BYTES))

    def finish(self) -> Iterator[bytes]:
        """What was held back, once the body ended; raises :class:`Undecodable` when no reading ended."""
        if self._kept is not None:
            return self._kept.finish()
        failure = Undecodable("the deflate stream ended early")
        for reading in self._held:
            try:
                reading.finish()
            except Undecodable as exc:
                failure = exc
                continue
            return self._keep(reading)
        raise failure


_Layer = _Inflater | _Deflate


def _layer(coding: str) -> _Layer:
    return _Deflate() if coding == "deflate" else _Inflater(coding, _WBITS[coding])


class Inflating(httpx2.AsyncByteStream):
    """A response's raw stream with its content codings undone, piece by bounded piece; with ``utf8``,
    a piece that is not UTF-8 (or a body ending within a character) fails the read."""

    def __init__(self, raw: httpx2.AsyncByteStream, codings: list[str], *, utf8: bool = False) -> None:
        self._raw = raw
        self._codings = codings
        self._utf8 = utf8
        self.failure: str | None = None
        """Why the body could not be decoded, once that is known (the SDK may swallow the error)."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        layers = [_layer(coding) for coding in reversed(self._codings)]  # the last applied comes off first
        check = codecs.getincrementaldecoder("utf-8")() if self._utf8 else None
        try:
            async for chunk in self._raw:
                for piece in _through(layers, chunk):
                    yield _checked(check, piece)
            for at, layer in enumerate(layers):  # what a layer held back goes through the ones inside it
                for held in layer.finish():
                    for piece in _through(layers[at + 1 :], held):
                        yield _checked(check, piece)
            _checked(check, b"", final=True)
        except Undecodable as exc:
            self.failure = str(exc)
            raise

    async def aclose(self) -> None:
        await self._raw.aclose()


class Refused(httpx2.AsyncByteStream):
    """The raw stream of a body in a coding not undone here: reading it fails; it is never read."""

    def __init__(self, raw: httpx2.AsyncByteStream, reason: str) -> None:
        self._raw = raw
        self.reason = reason

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self

    async def __anext__(self) -> bytes:
        raise Undecodable(self.reason)

    async def aclose(self) -> None:
        await self._raw.aclose()


def _checked(check: codecs.IncrementalDecoder | None, piece: bytes, *, final: bool = False) -> bytes:
    """``piece``, once ``check`` took it as the next bytes of a UTF-8 text (None: no check)."""
    if check is not None:
        try:
            check.decode(piece, final)
        except UnicodeDecodeError as exc:
            raise Undecodable(f"an event stream that is not UTF-8 ({exc.reason})") from None
    return piece


def _through(layers: list[_Layer], data: bytes) -> Iterator[bytes]:
    """``data`` through every layer in turn, lazily: nothing is inflated ahead of its reader."""
    if not layers:
        if data:
            yield data
        return
    for piece in layers[0].feed(data):
        yield from _through(layers[1:], piece)


def take_codings(response: httpx2.Response) -> None:
    """Undo ``response``'s content codings here from now on (the library then sees a plain body); an
    event stream is read as UTF-8 only (see the module docstring)."""
    codings = [c.strip().lower() for c in response.headers.get_list("content-encoding", split_commas=True)]
    codings = [c for c in codings if c and c != "identity"]
    events = _is_event_stream(response)
    if events:
        response.encoding = "utf-8"  # the library's text, not the content type's charset
    if not isinstance(response.stream, httpx2.AsyncByteStream):
        return
    if not codings:
        if events:
            response.stream = Inflating(response.stream, [], utf8=True)
        return
    unknown = [c for c in codings if c not in _WBITS]
    if unknown:
        said = f"its content coding {unknown[0][:50]!r} is not one of {ACCEPTED_CODINGS}, identity"
        response.stream = Refused(response.stream, said)
    elif len(codings) > _MAX_CODINGS:
        response.stream = Refused(response.stream, f"it names {len(codings)} content codings")
    else:
        response.stream = Inflating(response.stream, codings, utf8=events)
    del response.headers["content-encoding"]


def _is_event_stream(response: httpx2.Response) -> bool:
    kind = response.headers.get("content-type", "").partition(";")[0]
    return kind.strip().lower() == "text/event-stream"
