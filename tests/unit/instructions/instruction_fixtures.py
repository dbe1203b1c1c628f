"""Fixtures of the plain-language tests: the rule interpreter on the shipped presets, the API on the real engines
in-process, a fake OpenAI-compatible chat server, a photo server for image URLs."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from fastapi import FastAPI

from serve_app.instructions import RuleInterpreter, rule_interpreter
from serve_app.routes import create_api
from serve_app.settings import Settings
from tests.unit.instructions.fake_llm import FakeChatServer

MP4_START = b"\x00\x00\x00\x18ftypisom\x00\x00\x02\x00isomiso2"  # an MP4's first box


@pytest.fixture(scope="session")
def rules(job_ctx) -> RuleInterpreter:
    return rule_interpreter(job_ctx)


@pytest.fixture
def api(local_backend, mediapipe_dir) -> FastAPI:
    """The HTTP API on the real engines (GPEN and DCT-Net weights absent: their classic engines answer)."""
    app = create_api()
    app.state.backend = local_backend
    app.state.settings = Settings(model_store=str(mediapipe_dir.parent))
    return app


@pytest.fixture
def fake_llm():
    with FakeChatServer() as server:
        yield server


@pytest.fixture
def photo_server(photo_jpeg):
    """127.0.0.1:PORT: ``/me.jpg`` the photo, ``/away`` a redirect to it, ``/missing`` a 404, ``/chunked`` a chunked
    answer, ``/drip`` one byte every 50 ms for 3 s, ``/clip.mp4`` an MP4's first box and 5000 bytes more; ``served``
    lists the paths asked for."""
    served: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the http.server hook name)
            served.append(self.path)
            if self.path == "/away":
                self.send_response(302)
                self.send_header("Location", "/me.jpg")
                self.end_headers()
            elif self.path == "/missing":
                self.send_error(404)
            elif self.path == "/chunked":  # what HTTP/1.0 forbids: the framing would end up in the image
                self.send_response(200)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self.wfile.write(b"4\r\nabcd\r\n0\r\n\r\n")
            elif self.path == "/drip":
                self.send_response(200)
                self.end_headers()
                for _ in range(60):
                    self.wfile.write(b"\xff")
                    self.wfile.flush()
                    time.sleep(0.05)
            else:
                body = MP4_START + bytes(5000) if self.path == "/clip.mp4" else photo_jpeg
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    server.served = served
    yield server
    server.shutdown()
    server.server_close()
