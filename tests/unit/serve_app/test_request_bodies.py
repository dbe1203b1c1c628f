"""Request bodies are streamed under a running byte cap and one read deadline: an over-size body (chunked, JSON or a
multipart part) is refused when it passes the cap, not after it was read whole; a body that stops arriving frees its
slot at the deadline; the JSON cap allows for base64, so every image the limit allows fits; deeply nested JSON is
the caller's 422, never our 500."""

from __future__ import annotations

import asyncio
import base64
import io
import struct
import zlib

import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image

from serve_app.routes import create_api
from serve_app.settings import Settings
from serve_app.uploads import FORM_OVERHEAD_BYTES
from tests.asgi_bodies import CHUNK_BYTES, filler, json_parts, multipart_parts, send_chunked, send_stalled

MAX_IMAGE_BYTES = 1_000_000
SENT_BYTES = 60_000_000  # what the client would send: far past every cap


def _app(backend, **settings):
    app = create_api()
    app.state.backend = backend
    app.state.settings = Settings(max_image_bytes=MAX_IMAGE_BYTES, **settings)
    return app


@pytest.mark.parametrize(
    ("content_type", "parts", "cap_bytes"),
    [
        ("image/png", filler(SENT_BYTES), MAX_IMAGE_BYTES),
        ("multipart/form-data; boundary=b0undary", multipart_parts(SENT_BYTES), MAX_IMAGE_BYTES + FORM_OVERHEAD_BYTES),
        ("application/json", json_parts(SENT_BYTES), MAX_IMAGE_BYTES * 4 // 3 + 4 + FORM_OVERHEAD_BYTES),
    ],
    ids=["raw", "multipart", "json"],
)
def test_a_chunked_body_over_the_cap_is_refused_at_the_cap_not_read_whole(
    local_backend, content_type, parts, cap_bytes
):
    answer = asyncio.run(send_chunked(_app(local_backend), "/v1/restore", content_type, parts))
    assert (answer.status, answer.json()["error"]["code"]) == (413, "image_too_large")
    details = {"limit": "max_image_bytes", "max_bytes": MAX_IMAGE_BYTES, "setting": "PORTRAIT_MAX_IMAGE_BYTES"}
    assert answer.json()["error"]["details"] == details
    assert cap_bytes < answer.bytes_read <= cap_bytes + CHUNK_BYTES


def test_a_body_that_stops_arriving_is_refused_at_the_body_deadline(local_backend):
    app = _app(local_backend, body_timeout_s=0.2)
    answer = asyncio.run(send_stalled(app, "/v1/restore", "image/png", b"\x89PNG", timeout_s=10))
    assert answer.status == 408
    assert answer.json()["error"] == {
        "code": "body_timeout",
        "message": "the request body did not arrive within 0.2 s (4 bytes by then)",
        "details": {"timeout_s": 0.2},
    }


def test_a_legal_16_mib_photo_sent_as_image_b64_is_read(local_backend):
    """The largest photos the 20 MiB limit allows grow by a third in base64: the JSON cap allows for it."""
    photo = _png_of_bytes(16 * 1024 * 1024)
    app = create_api()
    app.state.backend = local_backend
    app.state.settings = Settings()  # the default 20 MiB limit
    with TestClient(app) as client:
        answer = client.post("/v1/faces", json={"image_b64": base64.b64encode(photo).decode("ascii")})
    assert answer.status_code == 200
    assert {key: answer.json()[key] for key in ("width", "height", "faces")} == {"width": 64, "height": 48, "faces": []}


def _png_of_bytes(total_bytes: int) -> bytes:
    """A legal 64x48 PNG of ``total_bytes``: a private ancillary chunk (which decoders skip) fills it up."""
    buffer = io.BytesIO()
    Image.fromarray(np.full((48, 64, 3), 128, np.uint8)).save(buffer, format="PNG")
    small = buffer.getvalue()
    payload = b"\0" * (total_bytes - len(small) - 12)
    chunk = struct.pack(">I", len(payload)) + b"prVt" + payload + struct.pack(">I", zlib.crc32(b"prVt" + payload))
    header_end = 8 + 25  # the signature, then IHDR (13 bytes of data and 12 of length, type and CRC)
    return small[:header_end] + chunk + small[header_end:]


NESTED = b"[" * 100_000 + b"]" * 100_000


def test_deeply_nested_json_is_a_422_on_a_job_route(local_backend):
    with TestClient(_app(local_backend), raise_server_exceptions=False) as client:
        answer = client.post("/v1/restore", content=NESTED, headers={"Content-Type": "application/json"})
    assert (answer.status_code, answer.json()) == (
        422,
        {"error": {"code": "invalid_parameter", "message": "the JSON body cannot be parsed: it is nested too deeply"}},
    )


def test_deeply_nested_json_is_a_422_on_the_chat_route(local_backend):
    with TestClient(_app(local_backend), raise_server_exceptions=False) as client:
        answer = client.post("/v1/chat/completions", content=NESTED, headers={"Content-Type": "application/json"})
    assert (answer.status_code, answer.json()["error"]["code"]) == (422, "invalid_parameter")
