"""Callback receivers that misbehave, as an attacker's would, served on 127.0.0.1 by asyncio (plain HTTP): one answers
200 and then an endless body, one drips its headers a byte at a time. ``bench/callback_abuse.py`` runs them too."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

CHUNK = b"x" * 65_536

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@dataclass
class Abuse:
    """What the receiver did: requests read, bytes of answer written, and when the runner hung up (seconds after the
    request arrived; None while it has not)."""

    requests: int = 0
    sent: int = 0
    hung_up_after_s: float | None = None


async def read_request(reader: asyncio.StreamReader) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    found = re.search(rb"(?i)content-length: *(\d+)", head)
    await reader.readexactly(int(found.group(1)) if found else 0)


def endless_body(abuse: Abuse, *, limit_bytes: int) -> Handler:
    """200, no length, then 64 KiB chunks until ``limit_bytes`` are sent (then it closes: the body's end) or the runner
    closes the connection."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        abuse.requests += 1
        started = time.monotonic()
        try:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n")
            while abuse.sent < limit_bytes:
                writer.write(CHUNK)
                await writer.drain()
                abuse.sent += len(CHUNK)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        abuse.hung_up_after_s = time.monotonic() - started
        writer.close()

    return handle


def dripping_headers(abuse: Abuse, *, interval_s: float, stop_after_s: float) -> Handler:
    """A status line, then one byte of a header every ``interval_s`` (each read of the runner gets something, so no
    read ever times out); after ``stop_after_s`` the headers end (200) and the connection closes."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        abuse.requests += 1
        started = time.monotonic()
        try:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Drip: ")
            await writer.drain()
            while time.monotonic() - started < stop_after_s:
                if reader.at_eof():
                    raise ConnectionResetError
                await asyncio.sleep(interval_s)
                writer.write(b"d")
                await writer.drain()
                abuse.sent += 1
            writer.write(b"\r\n\r\n")
            await writer.drain()
            await _until_closed(reader)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        abuse.hung_up_after_s = time.monotonic() - started
        writer.close()

    return handle


async def _until_closed(reader: asyncio.StreamReader) -> None:
    while await reader.read(65_536):
        pass


@asynccontextmanager
async def serving(handler: Handler) -> AsyncIterator[str]:
    """The receiver on 127.0.0.1 (a free port) for the ``async with``; yields its URL."""
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/hook"
    finally:
        server.close()
        await asyncio.wait_for(server.wait_closed(), 5)
