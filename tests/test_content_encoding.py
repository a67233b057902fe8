"""The decoding of compressed request bodies (electra.serving.http.middleware.content_encoding) on its own,
below HTTP: what a route reading the body gets, step by step. Through a running server and tritonclient:
tests/test_standard_clients.py."""

from __future__ import annotations

import asyncio
import gzip
import zlib
from typing import Any

import pytest
from litestar.exceptions import HTTPException
from litestar.exceptions.http_exceptions import RequestEntityTooLarge

from electra.serving.http.middleware.content_encoding import (
    CHUNK,
    MAX_MEMBERS,
    BadEncoding,
    Inflating,
    coding_of,
)


def receive_of(wire: bytes, piece: int) -> Any:
    """An ASGI receive that hands over `wire` `piece` bytes at a time."""
    parts = [wire[i : i + piece] for i in range(0, len(wire), piece)] or [b""]

    async def receive() -> dict[str, Any]:
        body = parts.pop(0)
        return {"type": "http.request", "body": body, "more_body": bool(parts)}

    return receive


def read(receive: Any, limit: int | None = None) -> list[bytes]:
    """The chunks a route gets, stopping as Litestar does once they pass `limit`."""

    async def run() -> list[bytes]:
        chunks, total = [], 0
        while True:
            message = await receive()
            chunks.append(message["body"])
            total += len(message["body"])
            if limit is not None and total > limit:
                raise RequestEntityTooLarge
            if not message["more_body"]:
                return chunks

    return asyncio.run(run())


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
@pytest.mark.parametrize("piece", [1, 1000, 10**7])
def test_bodies_come_out_whole_in_bounded_chunks(coding: str, piece: int) -> None:
    body = b"".join(b"text %d, " % i for i in range(60_000))  # 0.6 MB, compresses about 5x
    wire = gzip.compress(body) if coding == "gzip" else zlib.compress(body)
    chunks = read(Inflating(receive_of(wire, piece), coding, limit=10**7))
    assert b"".join(chunks) == body
    assert max(len(c) for c in chunks) <= CHUNK


def test_a_bomb_is_cut_off_after_a_chunk_past_the_limit() -> None:
    wire = gzip.compress(b"\0" * 50_000_000)  # 50 MB from 50 kB
    decoded = []

    async def count(receive: Any) -> None:
        while True:
            message = await receive()
            decoded.append(len(message["body"]))
            if sum(decoded) > 1_000_000:
                raise RequestEntityTooLarge

    with pytest.raises(RequestEntityTooLarge):
        asyncio.run(count(Inflating(receive_of(wire, 65536), "gzip", limit=1_000_000)))
    assert sum(decoded) <= 1_000_000 + CHUNK  # never more than a chunk past the limit


def test_the_wire_bytes_count_against_the_limit_too() -> None:
    wire = gzip.compress(bytes(range(256)) * 4000)  # ~1 MB that barely compresses
    with pytest.raises(RequestEntityTooLarge):
        read(Inflating(receive_of(wire, 4096), "gzip", limit=len(wire) // 2))


def test_a_cut_off_stream_is_an_error() -> None:
    with pytest.raises(BadEncoding, match="ends before its stream does"):
        read(Inflating(receive_of(zlib.compress(b"x" * 1000)[:-3], 100), "deflate", limit=10**6))


def test_gzip_members_are_read_up_to_a_bound() -> None:
    """Several members make one body (RFC 1952); each restarts the decoder on a copy of the input left, so a
    body of many empty members (20 bytes each) cost time quadratic in its size: refused past MAX_MEMBERS."""
    parts = [b'{"text": ', b'"a b"', *[b""] * (MAX_MEMBERS - 3), b"}"]
    wire = b"".join(gzip.compress(part) for part in parts)
    assert b"".join(read(Inflating(receive_of(wire, 10**7), "gzip", limit=10**6))) == b"".join(parts)
    with pytest.raises(BadEncoding, match=f"more than {MAX_MEMBERS} gzip members"):
        read(Inflating(receive_of(gzip.compress(b"") + wire, 10**7), "gzip", limit=10**6))


@pytest.mark.parametrize(
    ("header", "coding"),
    [("gzip", "gzip"), ("GZIP", "gzip"), ("x-gzip", "gzip"), ("deflate", "deflate"), ("identity", None),
     ("identity, gzip", "gzip"), ("", None)],
)  # fmt: skip
def test_the_coding_is_read_from_the_header(header: str, coding: str | None) -> None:
    assert coding_of([(b"content-encoding", header.encode())]) == coding
    assert coding_of([(b"content-type", b"application/json")]) is None


@pytest.mark.parametrize("header", ["br", "zstd", "compress", "gzip, deflate", "gzip, gzip"])
def test_other_codings_are_415_naming_the_supported_ones(header: str) -> None:
    with pytest.raises(HTTPException) as e:
        coding_of([(b"content-encoding", header.encode())])
    assert e.value.status_code == 415 and e.value.headers == {"Accept-Encoding": "gzip, deflate"}


def test_codings_answered_inside_the_route_are_counted_with_their_status(
    serving_bundles: dict[str, Any],
) -> None:
    """A 415 surfaces where the route reads its body, inside the middlewares, so the HTTP metrics count it
    as such, not as a 500 of an exception that went past them; a compressed body whose Content-Length is over
    the limit is named by that size."""
    from litestar.testing import TestClient
    from prometheus_client import REGISTRY

    from electra.serving.http.app import create_app
    from electra.serving.settings import ModelSpec, ServeSettings

    def count(status: int) -> float:
        labels = {"method": "POST", "path": "/detect", "app_name": "electra", "status_code": str(status)}
        return REGISTRY.get_sample_value("electra_http_requests_total", labels) or 0.0

    settings = ServeSettings(models=(ModelSpec("detector", serving_bundles["detector"]),), threads=1)
    before = {s: count(s) for s in (415, 413, 500)}
    with TestClient(create_app(settings)) as client:
        r = client.post("/detect", content=b'{"text": "a"}', headers={"Content-Encoding": "br"})
        assert r.status_code == 415 and r.headers["accept-encoding"] == "gzip, deflate"
        wire = gzip.compress(b'{"text": "' + b"a" * 3_000_000 + b'"}')
        r = client.post("/detect", content=wire + b"\0" * 2_000_000, headers={"Content-Encoding": "gzip"})
        assert r.status_code == 413 and "bytes, gzip-compressed)" in r.json()["detail"]
    assert {s: count(s) - before[s] for s in before} == {415: 1, 413: 1, 500: 0}
