"""The Serve application end to end on 127.0.0.1: health, models, OpenAPI, faces, and errors as JSON."""

from __future__ import annotations

import asyncio
import base64
import io

import httpx
import numpy as np
import pytest
from PIL import Image

pytestmark = pytest.mark.slow


def _jpeg(rgb: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(rgb).save(buffer, format="JPEG", quality=92)
    return buffer.getvalue()


def test_healthz_lists_every_deployment_and_the_builtin_models(serve_url):
    body = httpx.get(f"{serve_url}/healthz", timeout=30).json()
    assert body["status"] in ("ok", "degraded")
    assert {"Ingress", "FaceAnalyzer"} <= set(body["deployments"])
    states = {model["name"]: model["state"] for model in body["models"]}
    assert states["face-detect-short"] == "present" and states["face-mesh"] == "present"


def test_models_route_lists_the_manifest(serve_url):
    models = {m["name"]: m for m in httpx.get(f"{serve_url}/v1/models", timeout=30).json()["models"]}
    assert models["face-detect-short"]["state"] == "present"
    assert models["gpen-bfr-512"]["url"].endswith("GPEN-BFR-512.pth")


def test_openapi_docs_are_served(serve_url):
    assert httpx.get(f"{serve_url}/docs", timeout=30).status_code == 200
    paths = httpx.get(f"{serve_url}/openapi.json", timeout=30).json()["paths"]
    assert "/v1/faces" in paths and "/healthz" in paths


def test_faces_multipart_finds_the_astronaut(serve_url, astronaut_rgb):
    files = {"image": ("astronaut.jpg", _jpeg(astronaut_rgb), "image/jpeg")}
    body = httpx.post(f"{serve_url}/v1/faces", files=files, timeout=60).json()
    assert (body["width"], body["height"]) == (512, 512)
    [face] = body["faces"]
    x1, y1, x2, y2 = face["box"]
    assert 150 < (x1 + x2) / 2 < 300 and 50 < (y1 + y2) / 2 < 220
    assert len(face["landmarks"]) == 5


def test_faces_json_base64_gives_the_same_answer(serve_url, astronaut_rgb):
    payload = {"image_b64": base64.b64encode(_jpeg(astronaut_rgb)).decode()}
    body = httpx.post(f"{serve_url}/v1/faces", json=payload, timeout=60).json()
    assert len(body["faces"]) == 1


def test_a_text_file_gets_a_415_json_error(serve_url):
    files = {"image": ("photo.jpg", b"not an image at all", "image/jpeg")}
    answer = httpx.post(f"{serve_url}/v1/faces", files=files, timeout=30)
    assert answer.status_code == 415
    assert answer.json()["error"]["code"] == "unsupported_image"


def test_a_missing_image_field_gets_a_422_json_error(serve_url):
    answer = httpx.post(f"{serve_url}/v1/faces", data={"other": "x"}, files={"x": ("a", b"b")}, timeout=30)
    assert answer.status_code == 422
    assert answer.json()["error"] == {
        "code": "invalid_parameter",
        "message": "the multipart form has no file field 'image'",
    }


def test_a_photo_too_small_to_analyze_fails_alone_among_concurrent_requests(serve_url, astronaut_rgb):
    """#21 row 20: a 1x1 image decodes, but face analysis needs 8 px a side; sent with seven good photos (which the
    analyzer may batch with it), it alone gets its 422 and the seven get their faces."""
    tiny = io.BytesIO()
    Image.fromarray(np.zeros((1, 1, 3), np.uint8)).save(tiny, format="PNG")
    photos = [_jpeg(astronaut_rgb)] * 7 + [tiny.getvalue()]

    async def send_all() -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=120) as client:
            return await asyncio.gather(
                *(client.post(f"{serve_url}/v1/faces", files={"image": ("p", photo, "image/png")}) for photo in photos)
            )

    answers = asyncio.run(send_all())
    assert [answer.status_code for answer in answers] == [200] * 7 + [422]
    assert all(len(answer.json()["faces"]) == 1 for answer in answers[:7])
    assert answers[7].json()["error"] == {
        "code": "invalid_parameter",
        "message": "face analysis input: 1x1 is smaller than 8 px a side",
    }
