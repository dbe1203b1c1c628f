"""Cartoonization end to end through Serve, with a random-weight DCT-Net graph (official format) for ``anime``."""

from __future__ import annotations

import io

import cv2
import httpx
import numpy as np
import pytest
from PIL import Image

from deployments.cartoon.compose import head_mask, prepare_background
from deployments.faces.align import align_face

pytestmark = pytest.mark.slow


def _post(serve_url: str, route: str, png: bytes, **fields) -> httpx.Response:
    return httpx.post(f"{serve_url}{route}", files={"image": ("two.png", png, "image/png")}, data=fields, timeout=180)


def test_output_keeps_the_input_size_and_names_the_engine(serve_url, two_faces, two_faces_png):
    answer = _post(serve_url, "/v1/cartoon", two_faces_png, style="anime")
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "image/png"
    assert answer.headers["x-portrait-engine"] == "dctnet" and answer.headers["x-portrait-faces"] == "2"
    out = np.asarray(Image.open(io.BytesIO(answer.content)).convert("RGB"))
    assert out.shape == two_faces.shape
    assert np.abs(out.astype(int) - two_faces.astype(int)).mean() > 5


def test_heads_blend_without_a_seam_at_the_mask_border(serve_url, two_faces, two_faces_png):
    out = np.asarray(Image.open(io.BytesIO(_post(serve_url, "/v1/cartoon", two_faces_png).content)).convert("RGB"))
    gray = cv2.cvtColor(out, cv2.COLOR_RGB2GRAY).astype(np.float32)
    gradient = np.hypot(cv2.Sobel(gray, cv2.CV_32F, 1, 0), cv2.Sobel(gray, cv2.CV_32F, 0, 1))
    faces = httpx.post(f"{serve_url}/v1/faces", files={"image": ("a.png", two_faces_png)}, timeout=60).json()["faces"]
    mask = head_mask()
    for face in faces:
        matrix = align_face(two_faces, np.array(face["landmarks"]), "dctnet-288").matrix
        footprint = cv2.warpAffine(mask, cv2.invertAffineTransform(matrix), (1024, 600), flags=cv2.INTER_LINEAR)
        border = (footprint > 0.02) & (footprint < 0.2)
        near = (cv2.dilate(border.astype(np.uint8), np.ones((15, 15))) > 0) & ~border
        seam_ratio = gradient[border].mean() / gradient[near].mean()
        assert seam_ratio < 1.5, f"gradient across the mask border is {seam_ratio:.2f}x its surroundings"


def test_a_style_without_weights_uses_the_classic_engine(serve_url, two_faces_png):
    answer = _post(serve_url, "/v1/cartoon", two_faces_png, style="sketch")
    assert answer.headers["x-portrait-engine"] == "classic-cartoon"
    assert answer.headers["x-portrait-weights"] == "none"


def test_compat_route_answers_png(serve_url, two_faces_png):
    answer = _post(serve_url, "/api/cartoon", two_faces_png)
    assert answer.status_code == 200 and answer.headers["content-type"] == "image/png"


def test_styles_route_reports_engines(serve_url):
    styles = {s["name"]: s for s in httpx.get(f"{serve_url}/v1/cartoon/styles", timeout=30).json()["styles"]}
    assert set(styles) == {"anime", "3d", "handdrawn", "sketch", "artstyle"}
    assert styles["anime"]["engine"] == "dctnet" and styles["anime"]["head_engine"] == "dctnet"
    assert styles["sketch"]["engine"] == "classic-cartoon"


def test_unknown_style_is_a_422(serve_url, two_faces_png):
    answer = _post(serve_url, "/v1/cartoon", two_faces_png, style="cubist")
    assert answer.status_code == 422 and "anime" in answer.json()["error"]["message"]


def test_background_input_is_padded_to_multiples_of_16():
    prepared = prepare_background(np.zeros((1000, 1500, 3), np.uint8))
    assert prepared.size_wh == (1080, 720)
    assert prepared.padded.shape == (720, 1088, 3)
    assert (prepared.padded[:, 1080:] == 255).all()
