"""How much of an over-size body the ingress reads before its 413: a 60 MB chunked body (no Content-Length) sent to
``POST /v1/restore`` as raw bytes, as a multipart form and as JSON ``image_b64``, in 64 KiB chunks, to the FastAPI app
in-process with the default limits (20 MiB image). Prints the bytes the app had read when it answered, and how long
it took.

    .venv/bin/python bench/bench_body_cap.py
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.asgi_bodies

from serve_app.routes import create_api  # noqa: E402
from serve_app.settings import Settings  # noqa: E402
from tests.asgi_bodies import filler, json_parts, multipart_parts, send_chunked  # noqa: E402

SENT_BYTES = 60_000_000
SHAPES = {
    "raw image/png": ("image/png", filler),
    "multipart": ("multipart/form-data; boundary=b0undary", multipart_parts),
    "JSON image_b64": ("application/json", json_parts),
}


class NoStages:
    """The body is refused before any stage is asked; a job refused while decoding is still counted."""

    def observe_job(self, *args: object) -> None:
        pass


def main() -> None:
    app = create_api()
    app.state.backend = NoStages()
    app.state.settings = Settings()
    print(f"a {SENT_BYTES:,}-byte chunked body, image limit {app.state.settings.max_image_bytes:,} bytes")
    for name, (content_type, parts) in SHAPES.items():
        started = time.perf_counter()
        answer = asyncio.run(send_chunked(app, "/v1/restore", content_type, parts(SENT_BYTES)))
        took_ms = (time.perf_counter() - started) * 1000
        print(f"  {name:15s} {answer.status} after {answer.bytes_read:>12,} bytes read, {took_ms:7.1f} ms")


if __name__ == "__main__":
    main()
