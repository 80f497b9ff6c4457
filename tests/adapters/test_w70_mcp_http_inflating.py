"""The HTTP transport's own content decoding: whatever bytes and however chunked, a body comes out
whole or the read fails with the transport's one decoding error, in pieces that never exceed the
bound, however far a chunk inflates."""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import AsyncIterator

import anyio
import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.adapters._mcp_codings import PIECE_BYTES as _PIECE_BYTES
from actionspace.adapters._mcp_codings import Inflating as _Inflating
from actionspace.adapters._mcp_codings import Refused as _Refused
from actionspace.adapters._mcp_codings import Undecodable as _Undecodable
from actionspace.adapters._mcp_codings import take_codings


class _Chunks(httpx2.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk

    async def aclose(self) -> None:
        self.closed = True


def packed(data: bytes, wbits: int) -> bytes:
    packer = zlib.compressobj(6, zlib.DEFLATED, wbits)
    return packer.compress(data) + packer.flush()


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


def inflate(chunks: list[bytes], codings: list[str]) -> tuple[bytes, int]:
    async def read() -> tuple[bytes, int]:
        out, largest = bytearray(), 0
        async for piece in _Inflating(_Chunks(chunks), codings):
            out += piece
            largest = max(largest, len(piece))
        return bytes(out), largest

    return anyio.run(read)


_CODINGS = {"gzip": 31, "x-gzip": 31, "deflate": 15}


@settings(max_examples=150, deadline=None)
@given(
    data=st.binary(max_size=3000),
    coding=st.sampled_from(["gzip", "x-gzip", "deflate", "raw-deflate"]),
    cuts=st.lists(st.integers(min_value=0), max_size=6),
)
def test_a_compressed_body_comes_out_whole_however_it_is_chunked(
    data: bytes, coding: str, cuts: list[int]
) -> None:
    wbits = -15 if coding == "raw-deflate" else _CODINGS[coding]
    body = packed(data, wbits)
    out, _ = inflate(split(body, cuts), ["deflate" if coding == "raw-deflate" else coding])
    assert out == data


@settings(max_examples=300, deadline=None)
@given(
    body=st.binary(max_size=2000),
    codings=st.lists(st.sampled_from(["gzip", "deflate", "x-gzip"]), min_size=1, max_size=3),
    cuts=st.lists(st.integers(min_value=0), max_size=6),
)
def test_hostile_bytes_in_any_coding_end_whole_or_as_the_one_decoding_error(
    body: bytes, codings: list[str], cuts: list[int]
) -> None:
    with contextlib.suppress(_Undecodable):
        inflate(split(body, cuts), codings)


@settings(max_examples=100, deadline=None)
@given(
    data=st.binary(max_size=500),
    flips=st.lists(st.tuples(st.integers(min_value=0), st.integers(min_value=1, max_value=255)), max_size=4),
    cut=st.integers(min_value=0, max_value=40),
)
def test_a_damaged_or_cut_gzip_body_is_refused_or_read_exactly(
    data: bytes, flips: list[tuple[int, int]], cut: int
) -> None:
    body = bytearray(packed(data, 31))
    for at, mask in flips:
        body[at % len(body)] ^= mask
    damaged = bytes(body[: max(1, len(body) - cut)])
    try:
        out, _ = inflate([damaged], ["gzip"])
    except _Undecodable:
        return
    assert out == data  # a damage zlib cannot see (e.g. in the header's time field) changes nothing


def test_several_gzip_members_and_zero_padding_are_one_body() -> None:
    members = [packed(b"alpha ", 31), packed(b"", 31) * 5000, packed(b"beta", 31), b"\0" * 64]
    out, _ = inflate([b"".join(members)], ["gzip"])
    assert out == b"alpha beta"


def test_bytes_after_a_deflate_stream_are_refused() -> None:
    with pytest.raises(_Undecodable):
        inflate([packed(b"{}", 15) + b"junk"], ["deflate"])


def test_a_chunk_that_inflates_to_a_gigabyte_comes_out_in_bounded_pieces() -> None:
    zeros = bytes(1 << 20)
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    start = packer.compress(zeros) + packer.flush(zlib.Z_FULL_FLUSH)
    block = packer.compress(zeros) + packer.flush(zlib.Z_FULL_FLUSH)

    async def first_pieces() -> list[int]:
        sizes: list[int] = []
        stream = _Inflating(_Chunks([start + block * 1024]), ["gzip"])
        async for piece in stream:
            sizes.append(len(piece))
            if sum(sizes) > 8 << 20:
                break
        return sizes

    sizes = anyio.run(first_pieces)
    assert max(sizes) <= _PIECE_BYTES
    assert sum(sizes) > 8 << 20


@pytest.mark.parametrize(
    ("header", "kind"),
    [
        ("gzip", _Inflating),
        ("deflate, gzip", _Inflating),
        ("x-gzip", _Inflating),
        ("br", _Refused),
        ("gzip, zstd", _Refused),
        ("compress", _Refused),
        ("gzip, " * 4 + "gzip", _Refused),
        ("identity", _Chunks),
        ("", _Chunks),
    ],
)
def test_a_response_keeps_only_the_codings_the_transport_undoes(header: str, kind: type) -> None:
    raw = _Chunks([b"{}"])
    headers = {"content-encoding": header} if header else {}
    response = httpx2.Response(200, headers=headers, stream=raw)
    take_codings(response)
    assert isinstance(response.stream, kind)
    if kind is not _Chunks:
        assert "content-encoding" not in response.headers  # the library never decodes it a second time


def test_a_refused_coding_fails_the_read_and_is_never_decoded() -> None:
    response = httpx2.Response(200, headers={"content-encoding": "br"}, stream=_Chunks([b"{}"]))
    take_codings(response)

    async def read() -> bytes:
        return await response.aread()

    with pytest.raises(_Undecodable, match="'br'"):
        anyio.run(read)
