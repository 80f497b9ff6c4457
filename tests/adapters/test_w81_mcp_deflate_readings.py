"""``deflate`` bodies of the MCP client's HTTP answers: a zlib stream and raw deflate data both decode
to what was packed, also the raw streams whose first two bytes pass for a zlib header, however the
body is chunked, in bounded pieces; a zlib stream is not held back until its body ends."""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Iterator

import anyio
import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.adapters._mcp_codings import PIECE_BYTES, Inflating, Undecodable


class _Chunks(httpx2.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk


def packed(data: bytes, wbits: int, level: int = 6, strategy: int = zlib.Z_DEFAULT_STRATEGY) -> bytes:
    packer = zlib.compressobj(level, zlib.DEFLATED, wbits, 8, strategy)
    return packer.compress(data) + packer.flush()


def passes_for_zlib(body: bytes) -> bool:
    return len(body) >= 2 and body[0] & 0x0F == zlib.DEFLATED and (body[0] << 8 | body[1]) % 31 == 0


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


def inflate(chunks: list[bytes], codings: tuple[str, ...] = ("deflate",)) -> tuple[bytes, int]:
    async def read() -> tuple[bytes, int]:
        out, largest = bytearray(), 0
        async for piece in Inflating(_Chunks(chunks), list(codings)):
            out += piece
            largest = max(largest, len(piece))
        return bytes(out), largest

    return anyio.run(read)


def stored_first(data: bytes, cut: int, padding: int) -> bytes:
    """Raw deflate of ``data`` whose first block stores ``data[:cut]``, with ``padding`` (5 bits) in the
    bits a decoder ignores after that block's header: a legal stream, though zlib writes zeros there."""
    head = bytes([(padding & 0x1F) << 3]) + len(data[:cut]).to_bytes(2, "little")
    return head + (len(data[:cut]) ^ 0xFFFF).to_bytes(2, "little") + data[:cut] + packed(data[cut:], -15)


def raw_streams_like_zlib() -> Iterator[tuple[bytes, bytes]]:
    """(data, raw deflate of it) whose first two bytes pass for a zlib header (about 1 raw stream in 500
    where those bits are arbitrary), with and without a preset-dictionary flag, any window size."""
    for padding in range(1, 32, 2):
        for cut in range(256):
            data = bytes(range(cut)) + b"{} " * 50
            body = stored_first(data, cut, padding)
            if passes_for_zlib(body):
                yield data, body


def test_a_raw_stream_that_starts_like_a_zlib_header_is_read_whole() -> None:
    streams = list(raw_streams_like_zlib())
    assert len(streams) > 50
    for data, body in streams:
        assert inflate([body]) == (data, len(data))
        assert inflate([body[:1], body[1:2], body[2:]])[0] == data


@settings(max_examples=300, deadline=None)
@given(
    data=st.binary(max_size=3000),
    cut=st.integers(min_value=0, max_value=300),
    padding=st.integers(min_value=0, max_value=31),
    cuts=st.lists(st.integers(min_value=0), max_size=6),
)
def test_every_raw_stream_with_any_padding_bits_decodes_to_its_input(
    data: bytes, cut: int, padding: int, cuts: list[int]
) -> None:
    out, _ = inflate(split(stored_first(data, cut, padding), cuts))
    assert out == data


@settings(max_examples=300, deadline=None)
@given(
    data=st.binary(max_size=3000),
    wrapped=st.booleans(),
    level=st.integers(min_value=0, max_value=9),
    strategy=st.sampled_from([zlib.Z_DEFAULT_STRATEGY, zlib.Z_FILTERED, zlib.Z_HUFFMAN_ONLY, zlib.Z_FIXED]),
    cuts=st.lists(st.integers(min_value=0), max_size=6),
)
def test_every_zlib_or_raw_deflate_stream_decodes_to_its_input(
    data: bytes, wrapped: bool, level: int, strategy: int, cuts: list[int]
) -> None:
    body = packed(data, zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS, level, strategy)
    out, _ = inflate(split(body, cuts))
    assert out == data


@settings(max_examples=200, deadline=None)
@given(
    data=st.binary(max_size=400),
    wrapped=st.booleans(),
    flips=st.lists(st.integers(min_value=0), max_size=3),
    cuts=st.lists(st.integers(min_value=0), max_size=4),
)
def test_a_damaged_deflate_stream_ends_in_bounded_pieces_or_as_the_one_decoding_error(
    data: bytes, wrapped: bool, flips: list[int], cuts: list[int]
) -> None:
    body = bytearray(packed(data, zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS))
    for at in flips:
        body[at % len(body)] ^= 0x41
    try:
        _, largest = inflate(split(bytes(body), cuts))
    except Undecodable:
        return
    assert largest <= PIECE_BYTES


@pytest.mark.parametrize("wbits", [zlib.MAX_WBITS, -zlib.MAX_WBITS])
def test_a_deflate_bomb_comes_out_in_bounded_pieces(wbits: int) -> None:
    packer = zlib.compressobj(9, zlib.DEFLATED, wbits)
    start = packer.compress(bytes(1 << 20)) + packer.flush(zlib.Z_FULL_FLUSH)
    block = packer.compress(bytes(1 << 20)) + packer.flush(zlib.Z_FULL_FLUSH)

    async def first_pieces() -> list[int]:
        sizes: list[int] = []
        async for piece in Inflating(_Chunks([start + block * 512]), ["deflate"]):
            sizes.append(len(piece))
            if sum(sizes) > 8 << 20:
                break
        return sizes

    sizes = anyio.run(first_pieces)
    assert max(sizes) <= PIECE_BYTES
    assert sum(sizes) > 8 << 20


def test_a_flushed_zlib_event_comes_out_before_the_body_ends() -> None:
    packer = zlib.compressobj(6, zlib.DEFLATED, zlib.MAX_WBITS)
    first = packer.compress(b"event: message\ndata: {}\n\n") + packer.flush(zlib.Z_SYNC_FLUSH)
    more = anyio.Event()

    class _Slow(httpx2.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            yield first
            await more.wait()
            yield packer.flush()

    async def first_piece() -> bytes:
        async for piece in Inflating(_Slow(), ["deflate"]):
            more.set()
            return piece
        return b""

    assert anyio.run(first_piece) == b"event: message\ndata: {}\n\n"


def test_a_raw_stream_like_zlib_under_gzip_is_read_whole() -> None:
    data, body = next(raw_streams_like_zlib())
    assert inflate([packed(body, 31)], ("deflate", "gzip"))[0] == data


def test_bytes_after_a_raw_or_zlib_deflate_stream_are_refused() -> None:
    for wbits in (zlib.MAX_WBITS, -zlib.MAX_WBITS):
        with pytest.raises(Undecodable):
            inflate([packed(b"{}", wbits) + b"junk"])
