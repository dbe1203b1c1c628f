"""Real portraits through the real segmentation model and face analyzer."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from deployments.common.image import decode_image
from deployments.faces.analyze import FaceAnalysisPredictor
from deployments.idphoto.params import hex_to_rgb, parse_params
from deployments.idphoto.pipeline import make_id_photo

GEOMETRY_CHECKS = (
    "face_count",
    "head_height_ratio",
    "top_margin_ratio",
    "eye_tilt_deg",
    "horizontal_offset",
    "crown_visible",
    "background_uniformity",
    "sharpness",
)


@pytest.fixture(scope="module")
def analyzer(mediapipe_dir) -> FaceAnalysisPredictor:
    return FaceAnalysisPredictor(mediapipe_dir)


def assert_photo(outcome, spec_slug: str, colour: str, specs) -> None:
    spec = specs[spec_slug]
    image = Image.open(io.BytesIO(outcome.photo))
    assert image.size == (spec.width_px, spec.height_px)
    assert image.info["dpi"] == pytest.approx((spec.dpi, spec.dpi), abs=0.05)
    rgb = np.asarray(image.convert("RGB"))
    for corner in (rgb[:3, :3], rgb[:3, -3:]):
        assert (corner.reshape(-1, 3) == hex_to_rgb(colour)).all()
    report = outcome.report
    failed = [c.name for c in report.checks if c.name in GEOMETRY_CHECKS and not c.passed]
    assert not failed, report.to_json()


@pytest.mark.parametrize("matting", ["modnet", "selfie"])
def test_matte_of_astronaut_covers_the_person(matter, astronaut_rgb, matting):
    alpha = matter.matte(astronaut_rgb, matting)
    assert alpha.shape == astronaut_rgb.shape[:2] and alpha.dtype == np.float32
    assert alpha.min() >= 0.0 and alpha.max() <= 1.0
    assert alpha[150, 220] > 0.9 and alpha[20, 20] < 0.1 and alpha[20, 480] < 0.1


@pytest.mark.parametrize("matting", ["modnet", "selfie"])
@pytest.mark.parametrize(
    ("slug", "colour"), [("cn-1inch", "#628bce"), ("cn-2inch", "#ffffff"), ("icao-35x45", "#d74532")]
)
def test_astronaut(matter, analyzer, astronaut_rgb, specs, slug, colour, matting):
    faces = analyzer.analyze(astronaut_rgb)
    assert len(faces) == 1
    outcome = make_id_photo(
        astronaut_rgb,
        faces,
        matter,
        parse_params({"spec": slug, "background": colour, "format": "png", "matting": matting}),
    )
    assert_photo(outcome, slug, colour, specs)
    # The 512 px astronaut is too small for a print-size head: the report says so instead of hiding it.
    assert any("upsampled" in note for note in outcome.report.notes)


@pytest.mark.eval
@pytest.mark.parametrize("name", ["hivision_test0.jpg", "hivision_test1.jpg", "hivision_test2.jpg"])
@pytest.mark.parametrize(("slug", "colour"), [("cn-1inch", "#628bce"), ("cn-passport", "#ffffff")])
@pytest.mark.parametrize("matting", ["modnet", "selfie"])
def test_eval_portraits(shared_dir, matter, analyzer, specs, name, slug, colour, matting):
    decoded = decode_image((shared_dir / "eval" / "idphoto" / name).read_bytes())
    faces = analyzer.analyze(decoded.rgb)
    outcome = make_id_photo(
        decoded.rgb,
        faces,
        matter,
        parse_params({"spec": slug, "background": colour, "format": "png", "matting": matting}),
    )
    assert_photo(outcome, slug, colour, specs)
