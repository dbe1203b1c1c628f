"""The ID photo one step at a time: each step on the output of the one before, whole answers checked, and each
step's wrong inputs a 4xx in our error shape."""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
from PIL import Image

from deployments.common.image import encode_image
from tests.unit.serve_app.test_job_routes import client_for


@pytest.fixture(scope="module")
def client(local_backend):
    return client_for(local_backend)


def pixels(body: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(body)))


def step(client, name: str, image: bytes, **fields) -> bytes:
    answer = client.post(f"/v1/idphoto/{name}", files={"image": ("x.png", image, "image/png")}, data=fields)
    assert answer.status_code == 200, answer.text
    return answer.content


@pytest.fixture(scope="module")
def matted(client, photo_jpeg) -> bytes:
    return step(client, "matte", photo_jpeg)


@pytest.fixture(scope="module")
def cropped(client, matted) -> bytes:
    return step(client, "crop", matted, spec="cn-1inch")


def test_matte_cuts_the_person_out_of_the_whole_photo(matted):
    cut = pixels(matted)
    assert cut.shape == (256, 256, 4)
    assert cut[0, 0, 3] == 0 and cut[200, 128, 3] == 255  # a corner of the sky clear, the suit opaque


def test_crop_frames_the_cut_out_to_the_standard_and_reports(client, matted, cropped):
    photo = pixels(cropped)
    assert photo.shape == (413, 295, 4) and photo[0, 0, 3] == 0
    body = client.post(
        "/v1/idphoto/crop",
        files={"image": ("x.png", matted, "image/png")},
        data={"spec": "cn-1inch", "hd": "true", "return": "json"},
    ).json()
    assert body["step"] == "crop" and body["report"]["spec"]["slug"] == "cn-1inch"
    assert pixels(base64.b64decode(body["hd_b64"])).shape == (840, 600, 4)
    assert base64.b64decode(body["image_b64"]) == cropped  # the same photo, metadata beside it


def test_background_puts_the_exact_colour_behind_the_cropped_person(client, cropped):
    photo = pixels(step(client, "background", cropped, background="#628bce", format="png"))
    alpha = pixels(cropped)[..., 3]
    assert photo.shape == (413, 295, 3)
    assert (photo[alpha == 0] == (0x62, 0x8B, 0xCE)).all()  # every background pixel the requested colour


def test_watermark_then_layout_then_filesize_each_take_the_step_before(client, cropped):
    blue = step(client, "background", cropped, background="blue", format="png")
    marked = step(client, "watermark", blue, watermark_text="SAMPLE", watermark_opacity="0.8", format="png")
    assert pixels(marked).shape == (413, 295, 3) and pixels(marked).mean() < pixels(blue).mean()
    sheet = client.post(
        "/v1/idphoto/layout",
        files={"image": ("x.png", marked, "image/png")},
        data={"layout": "6inch", "return": "json"},
    ).json()
    assert (
        sheet["meta"]["width"] * sheet["meta"]["height"] == 1800 * 1200 and sheet["copies"] == 12
    )  # 3 x 4 one-inch photos on 4x6 in
    small = client.post(
        "/v1/idphoto/filesize",
        files={"image": ("x.png", marked, "image/png")},
        data={"max_kb": "20", "return": "json"},
    ).json()
    assert small["media_type"] == "image/jpeg" and small["encoding"]["size_ok"] is True
    assert len(base64.b64decode(small["image_b64"])) <= 20 * 1024


@pytest.mark.parametrize(
    ("name", "fields", "status", "words"),
    [
        ("matte", {"spec": "cn-1inch"}, 422, "spec: not an option of the matte step"),
        ("crop", {}, 422, "needs a transparent image"),
        ("background", {"background": "transparent", "format": "png"}, 422, "name one, not transparent"),
        ("filesize", {}, 422, "needs min_kb, max_kb or both"),
        ("layout", {}, 422, "needs layout"),
        ("watermark", {}, 422, "needs watermark_text"),
        ("background", {"render": "zigzag"}, 422, "render"),
    ],
)
def test_a_wrong_input_to_a_step_is_a_422_that_says_what_it_takes(client, photo_jpeg, name, fields, status, words):
    image = photo_jpeg if name in ("matte", "crop") else encode_image(np.zeros((64, 64, 3), np.uint8), "png")
    if name == "background":
        image = encode_image(np.zeros((64, 64, 3), np.uint8), "png", alpha=np.full((64, 64), 255, np.uint8))
    answer = client.post(f"/v1/idphoto/{name}", files={"image": ("x.png", image, "image/png")}, data=fields)
    assert answer.status_code == status, answer.text
    assert answer.json()["error"]["code"] == "invalid_parameter" and words in answer.json()["error"]["message"]


def test_crop_writes_its_hd_copy_at_the_physical_size_dpi_or_at_hd_dpi(client, matted):
    def hd_dpi(**fields) -> tuple[float, dict]:
        data = {"spec": "cn-1inch", "hd": "true", "return": "json", **fields}
        body = client.post("/v1/idphoto/crop", files={"image": ("x.png", matted, "image/png")}, data=data).json()
        return Image.open(io.BytesIO(base64.b64decode(body["hd_b64"]))).info["dpi"][0], body["hd"]

    physical, hd = hd_dpi()
    assert physical == pytest.approx(300 * 600 / 295, abs=0.1) and hd["dpi"] == pytest.approx(physical, abs=0.1)
    asked, hd = hd_dpi(hd_dpi="300")
    assert asked == pytest.approx(300, abs=0.1) and hd["dpi"] == 300
    refused = client.post(
        "/v1/idphoto/crop", files={"image": ("x.png", matted, "image/png")}, data={"spec": "cn-1inch", "hd_dpi": "300"}
    )
    assert refused.status_code == 422 and "needs hd=true" in refused.json()["error"]["message"]


def test_a_steps_file_has_the_sources_dpi_or_dpi(client, photo_jpeg, cropped):
    def dpi_of(body: bytes) -> float:
        return Image.open(io.BytesIO(body)).info["dpi"][0]

    assert dpi_of(step(client, "matte", photo_jpeg)) == pytest.approx(dpi_of(photo_jpeg), abs=0.1)
    assert dpi_of(step(client, "matte", photo_jpeg, dpi="150")) == pytest.approx(150, abs=0.1)
    blue = step(client, "background", cropped, background="blue", format="png", dpi="600")
    assert dpi_of(blue) == pytest.approx(600, abs=0.1)
    assert dpi_of(step(client, "watermark", blue, watermark_text="X", format="png")) == pytest.approx(600, abs=0.1)
    assert dpi_of(step(client, "filesize", blue, max_kb="30", dpi="350")) == pytest.approx(350, abs=0.1)


def test_layout_fits_the_photo_to_a_size_and_keeps_the_sheet_under_max_kb(client, cropped):
    sheet = client.post(
        "/v1/idphoto/layout",
        files={"image": ("x.png", cropped, "image/png")},
        data={"layout": "6inch", "width_px": "390", "height_px": "567", "max_kb": "200", "return": "json"},
    ).json()
    # 2-inch copies (390x567 px at 300 DPI): 4 on 4x6 in, where the 295x413 px photo as it came makes 12
    assert sheet["copies"] == 4 and sheet["media_type"] == "image/jpeg"
    assert sheet["meta"]["width"] * sheet["meta"]["height"] == 1800 * 1200
    assert sheet["encoding"]["size_ok"] is True and len(base64.b64decode(sheet["image_b64"])) <= 200 * 1024
