"""ID photos end to end through Serve: exact size, DPI, background colour, report, sheet, strict mode."""

from __future__ import annotations

import base64
import io

import httpx
import numpy as np
import pytest
from PIL import Image

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def portrait_png(astronaut_rgb) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(astronaut_rgb).save(buffer, format="PNG")
    return buffer.getvalue()


def _post(serve_url: str, data: bytes, **fields) -> httpx.Response:
    return httpx.post(
        f"{serve_url}/v1/idphoto", files={"image": ("a.png", data, "image/png")}, data=fields, timeout=120
    )


def test_one_inch_photo_has_the_exact_size_dpi_and_background(serve_url, portrait_png):
    answer = _post(serve_url, portrait_png, spec="cn-1inch", background="blue", format="png")
    assert answer.status_code == 200, answer.text
    report = _post(serve_url, portrait_png, spec="cn-1inch", background="blue", **{"return": "json"}).json()["report"]
    assert answer.headers["x-portrait-compliance"] == report["verdict"]
    image = Image.open(io.BytesIO(answer.content))
    assert image.size == (295, 413)
    assert tuple(round(v) for v in image.info["dpi"]) == (300, 300)
    pixels = np.asarray(image.convert("RGB"))
    for corner in (pixels[2, 2], pixels[2, -3]):
        assert corner.tolist() == [0x62, 0x8B, 0xCE]


def test_json_carries_the_report_and_the_print_sheet(serve_url, portrait_png):
    body = _post(serve_url, portrait_png, spec="us-passport", layout="6inch", **{"return": "json"}).json()
    report = body["report"]
    assert report["verdict"] == ("pass" if all(check["passed"] for check in report["checks"]) else "fail")
    assert report["face_count"] == 1
    assert {check["name"] for check in report["checks"]} >= {"head_height_ratio", "top_margin_ratio"}
    assert body["meta"]["job"] == "idphoto" and body["meta"]["engine"] == "modnet"
    sheet = Image.open(io.BytesIO(base64.b64decode(body["sheet_b64"])))
    assert sheet.size == (1200, 1800) or sheet.size == (1800, 1200)


def test_strict_mode_refuses_a_non_compliant_photo_with_reasons(serve_url, portrait_png):
    answer = _post(serve_url, portrait_png, spec="icao-35x45", strict="true")
    if answer.status_code == 200:
        assert answer.headers["x-portrait-compliance"] == "pass"
    else:
        assert answer.status_code == 422
        error = answer.json()["error"]
        assert error["code"] == "not_compliant" and error["details"]["reasons"]


def test_a_photo_without_a_face_is_a_422_no_face(serve_url):
    buffer = io.BytesIO()
    Image.new("RGB", (300, 400), (200, 200, 200)).save(buffer, format="PNG")
    answer = _post(serve_url, buffer.getvalue())
    assert answer.status_code == 422 and answer.json()["error"]["code"] == "no_face"


def test_unknown_spec_names_the_known_ones(serve_url, portrait_png):
    answer = _post(serve_url, portrait_png, spec="mars-passport")
    assert answer.status_code == 422
    assert "cn-1inch" in answer.json()["error"]["message"]


def test_specs_route_lists_at_least_25_presets(serve_url):
    specs = httpx.get(f"{serve_url}/v1/idphoto/specs", timeout=30).json()["specs"]
    slugs = {spec["slug"] for spec in specs}
    assert len(specs) >= 25 and {"cn-1inch", "cn-2inch", "us-passport", "icao-35x45"} <= slugs


def test_every_answer_names_its_matting_engine_and_the_mode_is_per_request(serve_url, portrait_png):
    default = _post(serve_url, portrait_png, spec="cn-1inch")
    assert default.status_code == 200, default.text
    assert "modnet" in default.headers["x-portrait-engine"]
    fast = _post(serve_url, portrait_png, spec="cn-1inch", matting="selfie")
    assert fast.status_code == 200 and fast.headers["x-portrait-engine"] == "selfie-segmentation+guided-filter"
    wrong = _post(serve_url, portrait_png, matting="grabcut")
    assert wrong.status_code == 422 and "matting" in wrong.json()["error"]["message"]
