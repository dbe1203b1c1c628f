"""Requests sent to an ASGI app the way a client on the network sends them: a chunked body (no Content-Length) in
pieces, counted as the app reads them, one that stops arriving, or one held midway (then resumed or left). Large
bodies are generated as they are sent (``filler``, ``VideoBody``: a valid MP4 of any size), never built whole. For
the body-limit and upload tests and their benchmarks."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

CHUNK_BYTES = 64 * 1024
VIDEO_BOUNDARY = "b0undary"
MULTIPART = f"multipart/form-data; boundary={VIDEO_BOUNDARY}"


@dataclass
class Answer:
    status: int = 0
    body: bytearray = field(default_factory=bytearray)
    bytes_read: int = 0  # body bytes the app had taken when it started to answer

    def json(self) -> dict:
        return json.loads(self.body)


def multipart_parts(total_bytes: int, boundary: str = "b0undary", head: bytes = b"") -> Iterator[bytes]:
    """A form whose field ``image`` holds ``total_bytes`` of data beginning with ``head`` (after one small option
    field)."""
    yield f'--{boundary}\r\nContent-Disposition: form-data; name="format"\r\n\r\npng\r\n'.encode()
    yield f'--{boundary}\r\nContent-Disposition: form-data; name="image"; filename="big.png"\r\n'.encode()
    yield b"Content-Type: image/png\r\n\r\n"
    yield head
    yield from filler(total_bytes - len(head))
    yield f"\r\n--{boundary}--\r\n".encode()


def json_parts(total_bytes: int, head: bytes = b"") -> Iterator[bytes]:
    """``{"image_b64": "AAAA..."}`` with ``total_bytes`` of base64, the encoding of ``head`` first (``head`` a whole
    number of base64 quanta: 3 bytes each)."""
    yield b'{"image_b64": "'
    yield base64.b64encode(head)
    yield from filler(total_bytes - len(head) * 4 // 3, b"A")
    yield b'"}'


class VideoBody:
    """``size_bytes`` of a valid MP4: the clip, then a ``free`` box of zeros, generated as it is sent."""

    def __init__(self, clip: bytes, size_bytes: int) -> None:
        self.head = clip + struct.pack(">I", size_bytes - len(clip)) + b"free"
        self.head += bytes(-len(self.head) % 3)  # whole base64 quanta: the JSON body encodes it apart
        self.size_bytes = size_bytes

    def sha256(self) -> str:
        digest = hashlib.sha256(self.head)
        for chunk in filler(self.size_bytes - len(self.head)):
            digest.update(chunk)
        return digest.hexdigest()

    def parts(self, shape: str, task: str = "restore", upscale: int | None = 2) -> Iterator[bytes]:
        zeros = self.size_bytes - len(self.head)
        if shape == "json":
            params = "" if upscale is None else f', "params": {{"upscale": {upscale}}}'
            yield f'{{"task": "{task}"{params}, "image_b64": "'.encode()
            yield base64.b64encode(self.head)
            yield from filler(zeros // 3 * 4, b"A")  # base64 of zeros
            yield base64.b64encode(bytes(zeros % 3))
            yield b'"}'
            return
        yield f'--{VIDEO_BOUNDARY}\r\nContent-Disposition: form-data; name="task"\r\n\r\n{task}\r\n'.encode()
        yield f'--{VIDEO_BOUNDARY}\r\nContent-Disposition: form-data; name="video"; filename="clip.mp4"\r\n'.encode()
        yield b"Content-Type: video/mp4\r\n\r\n"
        yield self.head
        yield from filler(zeros)
        if upscale is not None:
            yield f'\r\n--{VIDEO_BOUNDARY}\r\nContent-Disposition: form-data; name="upscale"\r\n\r\n{upscale}'.encode()
        yield f"\r\n--{VIDEO_BOUNDARY}--\r\n".encode()


def filler(total_bytes: int, byte: bytes = b"\x00") -> Iterator[bytes]:
    sent = 0
    while sent < total_bytes:
        size = min(CHUNK_BYTES, total_bytes - sent)
        sent += size
        yield byte * size


async def send_chunked(
    app, path: str, content_type: str, parts: Iterator[bytes], *, headers: dict[str, str] | None = None
) -> Answer:
    """POST ``parts`` as a chunked body; ``bytes_read`` says how much of it the app had read when it answered."""
    answer = Answer()
    pending = iter(parts)

    async def receive() -> dict:
        if answer.status:
            return {"type": "http.disconnect"}  # answered: the client is gone
        chunk = next(pending, None)
        if chunk is None:
            return {"type": "http.request", "body": b"", "more_body": False}
        answer.bytes_read += len(chunk)
        return {"type": "http.request", "body": chunk, "more_body": True}

    await app(_scope(path, content_type, headers or {}), receive, _sender(answer))
    return answer


async def send_stalled(app, path: str, content_type: str, first: bytes, *, timeout_s: float) -> Answer:
    """POST ``first`` and then nothing more, as a client that drips (or stops) does; gives up after ``timeout_s``."""
    answer = Answer()
    sent = False

    async def receive() -> dict:
        nonlocal sent
        if answer.status:
            return {"type": "http.disconnect"}
        if sent:
            await asyncio.Event().wait()  # the rest never comes
        sent = True
        answer.bytes_read += len(first)
        return {"type": "http.request", "body": first, "more_body": True}

    await asyncio.wait_for(app(_scope(path, content_type, {}), receive, _sender(answer)), timeout_s)
    return answer


@dataclass
class Hold:
    """Where a held upload stops: after ``after_bytes`` it waits for ``resume``, then goes on, or (``leave``)
    disconnects."""

    after_bytes: int
    resume: asyncio.Event = field(default_factory=asyncio.Event)
    reached: asyncio.Event = field(default_factory=asyncio.Event)
    leave: bool = False


async def send_held(
    app, path: str, content_type: str, parts: Iterator[bytes], hold: Hold, *, headers: dict[str, str] | None = None
) -> Answer:
    """POST ``parts`` as a chunked body that stops at ``hold.after_bytes`` (``hold.reached`` set) until
    ``hold.resume`` is set, then goes on or disconnects (``hold.leave``)."""
    answer = Answer()
    pending = iter(parts)

    async def receive() -> dict:
        if answer.status:
            return {"type": "http.disconnect"}
        if answer.bytes_read >= hold.after_bytes and (hold.leave or not hold.resume.is_set()):
            hold.reached.set()
            await hold.resume.wait()
            if hold.leave:
                return {"type": "http.disconnect"}
        chunk = next(pending, None)
        if chunk is None:
            return {"type": "http.request", "body": b"", "more_body": False}
        answer.bytes_read += len(chunk)
        return {"type": "http.request", "body": chunk, "more_body": True}

    await app(_scope(path, content_type, headers or {}), receive, _sender(answer))
    return answer


def _sender(answer: Answer):
    async def send(message: dict) -> None:
        if message["type"] == "http.response.start":
            answer.status = message["status"]
        elif message["type"] == "http.response.body":
            answer.body += message.get("body", b"")

    return send


def _scope(path: str, content_type: str, headers: dict[str, str]) -> dict:
    raw = {"content-type": content_type, "transfer-encoding": "chunked", **headers}
    path, _, query = path.partition("?")
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": query.encode(),
        "headers": [(name.encode("latin-1"), value.encode("latin-1")) for name, value in raw.items()],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
