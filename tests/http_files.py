"""A file server on 127.0.0.1 for download tests: each path behaves as told (ranges, truncation, stalls, errors).

Every request is logged with its ``Range`` header, so tests can check what a client asked for (a resume, a retry).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Route:
    """How one path answers. Counters (``unavailable``, ``truncations``) run down as requests arrive."""

    data: bytes = b""
    ranges: bool = True  # honour "Range: bytes=N-" with 206
    unavailable: int = 0  # answer 503 to this many requests first
    truncate_at: int | None = None  # send only this many body bytes, then close...
    truncations: int = 1_000_000  # ...for this many requests
    stall_s: float = 0.0  # say nothing for this long...
    stall_after_bytes: int | None = None  # ...after this many body bytes (None: before the status line)...
    stalls: int = 1_000_000  # ...in this many requests


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    range: str | None


class FileServer:
    """``routes`` maps a path (``/a/b.pth``) to its ``Route``; anything else is a 404."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.requests: list[Request] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._server.block_on_close = False
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def url(self, path: str) -> str:
        return self.base_url + path

    def gets(self, path: str) -> list[Request]:
        return [request for request in self.requests if request.method == "GET" and request.path == path]

    @contextmanager
    def running(self) -> Iterator[FileServer]:
        thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._server.shutdown()
            self._server.server_close()


def _handler_for(files: FileServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_HEAD(self) -> None:  # noqa: N802 (the http.server naming)
            self._answer(body=False)

        def do_GET(self) -> None:  # noqa: N802
            self._answer(body=True)

        def _answer(self, *, body: bool) -> None:
            range_header = self.headers.get("Range")
            files.requests.append(Request(self.command, self.path, range_header))
            route = files.routes.get(self.path)
            if route is None:
                self.send_error(404)
                return
            if route.unavailable > 0:
                route.unavailable -= 1
                self.send_error(503)
                return
            stall_s = route.stall_s if route.stalls > 0 else 0.0
            route.stalls -= 1
            if stall_s and route.stall_after_bytes is None:
                time.sleep(stall_s)
            start = _range_start(range_header) if route.ranges and range_header else 0
            if start >= len(route.data) and start > 0:
                self.send_error(416)
                return
            payload = route.data[start:]
            self.send_response(206 if start else 200)
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("ETag", '"v1"')
            if start:
                self.send_header("Content-Range", f"bytes {start}-{len(route.data) - 1}/{len(route.data)}")
            self.end_headers()
            if not body:
                return
            if stall_s and route.stall_after_bytes is not None:
                self._write(payload[: route.stall_after_bytes])
                time.sleep(stall_s)
                return
            if route.truncate_at is not None and route.truncations > 0:
                route.truncations -= 1
                self._write(payload[: route.truncate_at])
                return
            self._write(payload)

        def _write(self, data: bytes) -> None:
            try:
                self.wfile.write(data)
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up first (a timeout test): nothing left to tell it

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the http.server signature)
            return

    return Handler


def _range_start(header: str) -> int:
    return int(header.removeprefix("bytes=").split("-", 1)[0])
