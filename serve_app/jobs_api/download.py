"""A stored object as an HTTP response body, streamed: a job's result (a video's may be GiBs) costs the ingress one
chunk per download in flight, not the object's size."""

from __future__ import annotations

from collections.abc import Mapping

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from storage.base import ObjectReader


class ObjectResponse(StreamingResponse):
    """The reader's bytes with its length announced, each chunk read in a worker thread as the client takes them.
    Status and headers are decided before (the reader is open); the reader is closed however the response ends: read
    through, the client gone, or a failed read (the connection is then cut short of ``Content-Length``)."""

    def __init__(self, reader: ObjectReader, *, media_type: str, headers: Mapping[str, str]) -> None:
        length = {"Content-Length": str(reader.info.size_bytes)}
        super().__init__(reader, media_type=media_type, headers={**headers, **length})
        self._reader = reader

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._reader.close()
