"""A small OpenAI-compatible chat endpoint on 127.0.0.1 for the language-model tests: it records every request and
answers what the test scripts (a message content, an HTTP status, a delay). No model, no GPU."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    content: str = ""  # the assistant message's content (the model's "JSON")
    status: int = 200
    delay_s: float = 0.0
    raw: bytes | None = None  # the whole reply body instead of a chat completion (broken replies)
    declared_bytes: int | None = None  # the Content-Length sent, when it should lie (a reply cut short)


class FakeChatServer:
    def __init__(self) -> None:
        self.reply = Reply()
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the http.server hook name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                reply = server.reply
                time.sleep(reply.delay_s)
                if reply.status != 200:
                    payload = {"error": {"message": "scripted failure", "type": "server_error", "code": None}}
                else:
                    payload = {
                        "id": "chatcmpl-fake",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body.get("model"),
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": reply.content},
                                "finish_reason": "stop",
                            }
                        ],
                    }
                data = json.dumps(payload).encode("utf-8") if reply.raw is None else reply.raw
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(reply.declared_bytes or len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up first (the timeout tests): nobody is left to answer

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def answer(
        self,
        content: Any = "",
        *,
        status: int = 200,
        delay_s: float = 0.0,
        raw: bytes | None = None,
        declared_bytes: int | None = None,
    ) -> None:
        """What the next requests get: ``content`` (a dict is sent as its JSON text) after ``delay_s``, or the bytes
        ``raw`` as the whole body, announced as ``declared_bytes`` long when given."""
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        self.reply = Reply(text, status, delay_s, raw, declared_bytes)

    def __enter__(self) -> FakeChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
