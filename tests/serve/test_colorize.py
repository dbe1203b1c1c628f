"""Colorization through Serve: the Colorizer deployment answers, and without DDColor's weights says how to get them."""

from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.slow


def test_colorize_without_weights_is_a_503_naming_the_fetch_command(serve_url, two_faces_png):
    answer = httpx.post(
        f"{serve_url}/v1/colorize", files={"image": ("two.png", two_faces_png, "image/png")}, timeout=120
    )
    assert answer.status_code == 503, answer.text
    error = answer.json()["error"]
    assert error["code"] == "model_unavailable"
    assert "portrait models pull ddcolor_modelscope" in error["message"]


def test_restore_auto_on_a_colour_photo_leaves_it_and_says_so(serve_url, two_faces_png):
    answer = httpx.post(
        f"{serve_url}/v1/restore",
        files={"image": ("two.png", two_faces_png, "image/png")},
        data={"colorize": "auto"},
        timeout=120,
    )
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-portrait-colorized"] == "no: the photo is in colour"
