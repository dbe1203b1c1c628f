"""Every ID-photo step route and every HivisionIDPhotos route works within the ID-photo caps (#32 finding 5): a photo
over a step's cap is refused from its header (413 ``image_too_many_pixels`` naming the cap), before a pixel is
decoded; the steps that take a large cut-out composite it a band of rows at a time, with the same pixels as whole."""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from deployments.idphoto.background import composite, composite_in_bands, render_background
from deployments.idphoto.matte import LowResMatte
from deployments.idphoto.steps import cut_out
from deployments.idphoto.watermark import Watermark, draw_watermark
from tests.unit.serve_app.test_job_routes import client_for


def png_claiming(width: int, height: int) -> bytes:
    """A PNG whose header says ``width`` x ``height`` (what a hostile caller sends for a few hundred bytes)."""
    buffer = io.BytesIO()
    Image.fromarray(np.zeros((1, 1, 4), np.uint8)).save(buffer, format="PNG")
    small = buffer.getvalue()
    ihdr = b"IHDR" + struct.pack(">II", width, height) + small[24:29]
    return small[:12] + ihdr + struct.pack(">I", zlib.crc32(ihdr)) + small[33:]


STEP_ROUTES = [
    ("/v1/idphoto/matte", {}, "image", "a cut-out"),
    ("/v1/idphoto/crop", {"spec": "cn-1inch"}, "image", "a cut-out"),
    ("/v1/idphoto/background", {"background": "blue"}, "image", "an ID photo"),
    ("/v1/idphoto/watermark", {"watermark_text": "SAMPLE"}, "image", "an ID photo"),
    ("/v1/idphoto/layout", {"layout": "6inch"}, "image", "an ID photo"),
    ("/v1/idphoto/filesize", {"max_kb": "200"}, "image", "an ID photo"),
    ("/human_matting", {}, "input_image", "a cut-out"),
    ("/idphoto_crop", {"height": "413", "width": "295"}, "input_image", "a cut-out"),
    ("/add_background", {"color": "628bce"}, "input_image", "an ID photo"),
    ("/generate_layout_photos", {"height": "413", "width": "295"}, "input_image", "an ID photo"),
    ("/watermark", {"text": "SAMPLE"}, "input_image", "an ID photo"),
    ("/set_kb", {"kb": "50"}, "input_image", "an ID photo"),
    ("/v1/idphoto", {"spec": "cn-1inch"}, "image", "a photo for an ID photo"),
    ("/idphoto", {"height": "413", "width": "295"}, "input_image", "a photo for an ID photo"),
]


@pytest.fixture(scope="module")
def client(local_backend):
    return client_for(local_backend)


@pytest.mark.parametrize(("route", "fields", "field", "cap"), STEP_ROUTES, ids=[row[0] for row in STEP_ROUTES])
def test_a_7000_px_square_is_refused_from_its_header_naming_the_steps_cap(client, route, fields, field, cap):
    answer = client.post(route, files={field: ("big.png", png_claiming(7000, 7000), "image/png")}, data=fields)
    error = answer.json()["error"]  # HivisionIDPhotos' routes add their ``status: false``
    assert answer.status_code == 413 and error["code"] == "image_too_many_pixels"
    assert error["message"].startswith(cap) and error["details"]["width"] == 7000


@pytest.mark.parametrize("render", ["solid", "vertical", "radial"])
def test_a_background_composited_in_bands_is_the_whole_composite(render):
    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 256, (53, 37, 3), dtype=np.uint8)
    alpha = rng.integers(0, 256, (53, 37), dtype=np.uint8)
    whole = composite(
        rgb.astype(np.float32) / 255.0,
        alpha.astype(np.float32) / 255.0,
        render_background((40, 90, 200), (37, 53), render),
    )
    banded = composite_in_bands(
        rgb, alpha, lambda top, bottom: render_background((40, 90, 200), (37, 53), render, rows=(top, bottom)), 7
    )
    np.testing.assert_array_equal(banded, whole)


def test_a_watermark_drawn_in_bands_is_the_whole_watermark():
    photo = np.full((90, 70, 3), 200, np.uint8)
    mark = Watermark(text="SAMPLE")
    np.testing.assert_array_equal(
        draw_watermark(photo, mark, band_rows=9).rgb, draw_watermark(photo, mark, band_rows=10_000).rgb
    )


@pytest.mark.parametrize("matting", ["modnet", "selfie"])
def test_a_cut_out_made_in_bands_is_the_whole_cut_out(matting):
    rng = np.random.default_rng(1)
    rgb = rng.integers(0, 256, (120, 90, 3), dtype=np.uint8)
    alpha = np.zeros((64, 48), np.float32)
    alpha[16:, 12:36] = 1.0
    alpha[14:16, 12:36] = 0.5
    low = LowResMatte(alpha, np.array([[48 / 90, 0.0, 0.0], [0.0, 64 / 120, 0.0]]), (120, 90), matting)
    small, whole = cut_out(rgb, low, band_rows=11), cut_out(rgb, low, band_rows=10_000)
    np.testing.assert_array_equal(small.rgb, whole.rgb)
    np.testing.assert_array_equal(small.alpha, whole.alpha)
