"""End to end on synthetic portraits (no model needed): sizes, DPI, colours, reports, strictness."""

from __future__ import annotations

import io

import numpy as np
import pytest
from idphoto_samples import draw_portrait
from PIL import Image

from deployments.common.errors import NoFaceFound, NotCompliant
from deployments.idphoto.params import hex_to_rgb, parse_params
from deployments.idphoto.pipeline import make_id_photo
from deployments.idphoto.specs import default_specs

CORNER_PX = 4


def corners(rgb: np.ndarray) -> np.ndarray:
    c = CORNER_PX
    return np.concatenate([rgb[:c, :c].reshape(-1, 3), rgb[:c, -c:].reshape(-1, 3)])


@pytest.mark.parametrize("fmt", ["png", "jpeg"])
@pytest.mark.parametrize("slug", sorted(default_specs()))
def test_every_preset_renders_at_its_exact_size_and_dpi(portrait, specs, slug, fmt):
    spec = specs[slug]
    outcome = make_id_photo(
        portrait.rgb,
        [portrait.face],
        portrait.low_matte(),
        parse_params({"spec": slug, "format": fmt, "lighting": False}),
        specs,
    )
    image = Image.open(io.BytesIO(outcome.photo))
    assert image.format == ("PNG" if fmt == "png" else "JPEG")
    assert image.size == (spec.width_px, spec.height_px)
    assert image.info["dpi"] == pytest.approx((spec.dpi, spec.dpi), abs=0.05)  # PNG stores px per metre
    assert outcome.media_type == f"image/{fmt}"
    report = outcome.report
    assert report.check("head_height_ratio").passed, report.to_json()
    assert report.check("top_margin_ratio").passed, report.to_json()


@pytest.mark.parametrize("colour", ["white", "blue", "red", "#123456"])
def test_solid_background_corners_equal_the_colour(portrait, colour):
    outcome = make_id_photo(
        portrait.rgb, [portrait.face], portrait.low_matte(), parse_params({"background": colour, "format": "png"})
    )
    rgb = np.asarray(Image.open(io.BytesIO(outcome.photo)).convert("RGB"))
    expected = hex_to_rgb(parse_params({"background": colour}).background)
    assert (corners(rgb) == expected).all()
    assert outcome.report.verdict == "pass", outcome.report.reasons


def test_jpeg_corners_are_within_compression_noise(portrait):
    outcome = make_id_photo(portrait.rgb, [portrait.face], portrait.low_matte(), parse_params({"background": "red"}))
    rgb = np.asarray(Image.open(io.BytesIO(outcome.photo)).convert("RGB")).astype(int)
    assert np.abs(corners(rgb) - hex_to_rgb("#d74532")).max() <= 3


def test_gradients_differ_from_solid_and_transparent_has_alpha(portrait):
    low = portrait.low_matte()
    vertical = make_id_photo(portrait.rgb, [portrait.face], low, parse_params({"render": "vertical", "format": "png"}))
    rgb = np.asarray(Image.open(io.BytesIO(vertical.photo)).convert("RGB")).astype(int)
    assert (rgb[0, 0] == hex_to_rgb("#628bce")).all() and rgb[rgb.shape[0] // 3, 0].sum() > rgb[0, 0].sum() + 20
    radial = make_id_photo(portrait.rgb, [portrait.face], low, parse_params({"render": "radial", "format": "png"}))
    assert radial.photo != vertical.photo
    clear = make_id_photo(
        portrait.rgb, [portrait.face], low, parse_params({"background": "transparent", "format": "png"})
    )
    rgba = Image.open(io.BytesIO(clear.photo))
    assert rgba.mode == "RGBA"
    alpha = np.asarray(rgba)[..., 3]
    assert alpha[0, 0] == 0 and alpha[alpha.shape[0] // 2, alpha.shape[1] // 2] == 255


def test_roll_is_corrected_in_the_report(specs):
    tilted = draw_portrait(roll_deg=-6.0)
    outcome = make_id_photo(tilted.rgb, [tilted.face], tilted.low_matte(), parse_params({"spec": "cn-2inch"}))
    report = outcome.report
    assert abs(report.check("eye_tilt_deg").value) < 0.1
    assert any("levelled" in note for note in report.notes)
    assert report.verdict == "pass", report.reasons


def test_no_face_raises_and_several_faces_fail_the_report(portrait):
    with pytest.raises(NoFaceFound):
        make_id_photo(portrait.rgb, [], portrait.low_matte(), parse_params({}))
    small = draw_portrait().face
    from deployments.faces.types import Face

    tiny = Face(box=(10, 10, 40, 40), score=0.9, landmarks=small.landmarks * 0.1, roll_deg=0.0, chin=(25, 40))
    outcome = make_id_photo(portrait.rgb, [tiny, portrait.face], portrait.low_matte(), parse_params({}))
    report = outcome.report
    assert report.face_count == 2 and report.verdict == "fail"
    assert not report.check("face_count").passed
    assert "2 faces" in report.reasons[0]
    assert report.check("head_height_ratio").passed  # the largest face was used


def test_strict_raises_not_compliant_with_reasons(portrait):
    cut = draw_portrait(centre_xy=(600.0, 180.0))
    lenient = make_id_photo(cut.rgb, [cut.face], cut.low_matte(), parse_params({}))
    assert lenient.report.verdict == "fail"
    assert not lenient.report.check("crown_visible").passed
    with pytest.raises(NotCompliant) as caught:
        make_id_photo(cut.rgb, [cut.face], cut.low_matte(), parse_params({"strict": True}))
    assert caught.value.details["reasons"] == list(lenient.report.reasons)


def test_outcome_json_has_timings_and_checks(portrait):
    outcome = make_id_photo(portrait.rgb, [portrait.face], portrait.low_matte(), parse_params({"layout": "6inch"}))
    body = outcome.to_json()
    assert body["report"]["verdict"] == "pass"
    names = {c["name"] for c in body["report"]["checks"]}
    assert {
        "face_count",
        "head_height_ratio",
        "top_margin_ratio",
        "eye_tilt_deg",
        "horizontal_offset",
        "background_uniformity",
        "sharpness",
    } <= names
    assert body["timings_ms"]["total_ms"] > 0 and "layout_ms" in body["timings_ms"]
    sheet = Image.open(io.BytesIO(outcome.sheet))
    assert sorted(sheet.size) == [1200, 1800] and sheet.info["dpi"] == pytest.approx((300, 300))


def test_head_cut_by_the_top_of_the_source_is_reported_and_not_drawn_as_a_straight_line():
    cut = draw_portrait(centre_xy=(600.0, 180.0))  # the crown lies 50 px above the photo
    params = {"background": "transparent", "format": "png"}
    outcome = make_id_photo(cut.rgb, [cut.face], cut.low_matte(), parse_params(params))
    report = outcome.report
    check = report.check("head_cropped_in_source")
    assert not check.passed and check.value == 1.0
    assert any("cuts the head at its top edge" in reason for reason in report.reasons)
    # The crop starts inside the photo: the head leaves the frame at the top instead of ending against background.
    assert outcome.framing.padding["top"] == 0.0
    alpha = np.asarray(Image.open(io.BytesIO(outcome.photo)))[..., 3]
    centre = alpha.shape[1] // 2
    assert alpha[0, centre - 20 : centre + 20].min() == 255
    with pytest.raises(NotCompliant, match="cuts the head"):
        make_id_photo(cut.rgb, [cut.face], cut.low_matte(), parse_params({**params, "strict": True}))


def test_head_cut_by_a_side_of_the_source_is_reported():
    cut = draw_portrait(centre_xy=(140.0, 700.0))  # the head runs past the left edge
    outcome = make_id_photo(cut.rgb, [cut.face], cut.low_matte(), parse_params({}))
    assert outcome.framing.cut_sides == ("left",)
    assert not outcome.report.check("head_cropped_in_source").passed
    assert any("cuts the head at its left edge" in reason for reason in outcome.report.reasons)


def test_a_whole_head_is_not_reported_as_cut(portrait):
    outcome = make_id_photo(portrait.rgb, [portrait.face], portrait.low_matte(), parse_params({}))
    check = outcome.report.check("head_cropped_in_source")
    assert check.passed and check.value == 0.0 and outcome.framing.cut_sides == ()
