"""Restoration end to end through Serve, with a tiny generated GPEN standing in for GPEN-BFR-512."""

from __future__ import annotations

import base64
import io

import httpx
import numpy as np
import pytest
from PIL import Image

pytestmark = pytest.mark.slow


def _post(serve_url: str, png: bytes, **fields) -> httpx.Response:
    return httpx.post(
        f"{serve_url}/v1/restore", files={"image": ("two.png", png, "image/png")}, data=fields, timeout=120
    )


def test_both_faces_change_and_the_background_does_not(serve_url, two_faces, two_faces_png):
    answer = _post(serve_url, two_faces_png)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "image/png"
    assert answer.headers["x-portrait-engine"] == "gpen" and answer.headers["x-portrait-faces"] == "2"
    out = np.asarray(Image.open(io.BytesIO(answer.content)).convert("RGB"))
    assert out.shape == two_faces.shape
    diff = np.abs(out.astype(int) - two_faces.astype(int)).sum(axis=2)
    for x0 in (0, 512):
        face = diff[44 + 80 : 44 + 175, x0 + 177 : x0 + 272]
        assert face.mean() > 10, "a face was left unrestored"
    assert np.array_equal(out[:, 400:600][:, 0:10], two_faces[:, 400:600][:, 0:10])  # between the faces
    assert np.array_equal(out[:30], two_faces[:30]) and np.array_equal(out[-30:], two_faces[-30:])


def test_json_return_carries_metadata_and_crops(serve_url, two_faces_png):
    body = _post(serve_url, two_faces_png, **{"return": "json", "format": "jpeg"}).json()
    meta = body["meta"]
    assert meta["engine"] == "gpen" and meta["faces"] == 2 and meta["job"] == "restore"
    assert meta["weights"][0]["name"] == "gpen-bfr-512" and len(meta["weights"][0]["sha256"]) == 64
    assert (meta["width"], meta["height"], body["media_type"]) == (1024, 600, "image/jpeg")
    assert set(meta["timings_ms"]) >= {"decode", "analyze", "restore", "paste", "encode"}
    assert len(body["faces"]) == 2
    before = Image.open(io.BytesIO(base64.b64decode(body["faces"][0]["before_png_b64"])))
    assert before.size == (512, 512)
    assert Image.open(io.BytesIO(base64.b64decode(body["image_b64"]))).format == "JPEG"


def test_upscale_two_doubles_the_size(serve_url, two_faces_png):
    answer = _post(serve_url, two_faces_png, upscale="2")
    assert Image.open(io.BytesIO(answer.content)).size == (2048, 1200)


def test_without_weights_the_classic_engine_answers_and_says_so(serve_url, two_faces_png):
    answer = _post(serve_url, two_faces_png, model="gpen-bfr-256")
    assert answer.status_code == 200
    assert answer.headers["x-portrait-engine"] == "classic-restore"
    assert answer.headers["x-portrait-weights"] == "none"


def test_healthz_shows_the_degraded_restorer(serve_url):
    body = httpx.get(f"{serve_url}/healthz", timeout=30).json()
    assert body["status"] == "degraded"
    assert body["deployments"]["FaceRestorer256"]["engine"] == "classic-restore"
    assert body["deployments"]["FaceRestorer512"]["engine"] == "gpen"


def test_a_photo_without_faces_comes_back_unchanged(serve_url):
    flat = np.full((200, 300, 3), 128, np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(flat).save(buffer, format="PNG")
    answer = _post(serve_url, buffer.getvalue())
    assert answer.headers["x-portrait-faces"] == "0"
    assert np.array_equal(np.asarray(Image.open(io.BytesIO(answer.content)).convert("RGB")), flat)


def test_bad_options_get_a_422_naming_the_field(serve_url, two_faces_png):
    answer = _post(serve_url, two_faces_png, upscale="3", blend="2")
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error["code"] == "invalid_parameter"
    assert {p["field"] for p in error["details"]["problems"]} == {"upscale", "blend"}
