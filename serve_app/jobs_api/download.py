"""A stored object as an HTTP response body, streamed: a job's result (a video's may be GiBs) costs this app one chunk
per download in flight, not the object's size, whether it goes out as is or base64 inside JSON. (Ray Serve itself
does not pace a replica by its client: ``args.jobs.redirect_from_bytes`` sends large results to the store instead.)"""

from __future__ import annotations

import base64
from collections.abc import Iterator, Mapping
from typing import Any

from starlette.responses import JSONResponse, StreamingResponse
from starlette.types import Receive, Scope, Send

from storage.base import ObjectReader

JSON_TYPE = "application/json"


class ObjectResponse(StreamingResponse):
    """``chunks`` (by default the reader's bytes) with their length announced, each read in a worker thread as the
    client takes them. Status and headers are decided before (the reader is open); the reader is closed however the
    response ends: read through, the client gone, or a failed read (the connection then ends short of its length)."""

    def __init__(
        self,
        reader: ObjectReader,
        *,
        media_type: str,
        headers: Mapping[str, str],
        chunks: Iterator[bytes] | None = None,
        size_bytes: int | None = None,
    ) -> None:
        length = reader.info.size_bytes if size_bytes is None else size_bytes
        body = reader if chunks is None else chunks
        super().__init__(body, media_type=media_type, headers={**headers, "Content-Length": str(length)})
        self._reader = reader

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._reader.close()


def base64_json_response(
    reader: ObjectReader, field: str, fields: Mapping[str, Any], headers: Mapping[str, str]
) -> ObjectResponse:
    """The bytes ``JSONResponse({field: <the object in base64>, **fields})`` answers, its base64 encoded chunk by
    chunk as it streams (a 1 GiB video in ``return=json`` never becomes a 1.3 GiB string)."""
    head = JSONResponse({field: ""}).body[: -len(b'"}')]  # {"image_b64":"
    rest = JSONResponse(dict(fields)).body
    tail = b'"' + (b"," + rest[1:] if fields else b"}")
    encoded_bytes = -(-reader.info.size_bytes // 3) * 4
    chunks = _framed(head, _base64_chunks(reader), tail)
    size_bytes = len(head) + encoded_bytes + len(tail)
    return ObjectResponse(reader, media_type=JSON_TYPE, headers=headers, chunks=chunks, size_bytes=size_bytes)


def _framed(head: bytes, chunks: Iterator[bytes], tail: bytes) -> Iterator[bytes]:
    yield head
    yield from chunks
    yield tail


def _base64_chunks(reader: ObjectReader) -> Iterator[bytes]:
    """Base64 of the reader's bytes, encoded a chunk at a time: whole 3-byte groups, the rest carried over."""
    carry = b""
    for chunk in reader:
        data = carry + chunk
        whole = len(data) - len(data) % 3
        carry = data[whole:]
        yield base64.b64encode(data[:whole])
    if carry:
        yield base64.b64encode(carry)
