"""A callback receiver on 127.0.0.1 (a thread): records each POST's arrival time, body and signature header."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Callback:
    at_s: float
    body: bytes
    signature: str


@dataclass
class Receiver:
    calls: list[Callback] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> str:
        """Serve on a free port; returns the callback URL."""
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                with receiver.lock:
                    receiver.calls.append(Callback(time.time(), body, self.headers.get("X-Portrait-Signature", "")))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                return None

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{server.server_address[1]}/hook"
