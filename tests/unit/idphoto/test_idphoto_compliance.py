"""Compliance before looks, on composited photos with a known answer: the background is the requested colour in
every pixel outside the person, whatever the source's borders; the face is centred; crown margin and head height
follow the spec unless the report names the cut; clutter touching the person is dropped."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import cv2
import numpy as np
import pytest
from idphoto_samples import SyntheticPortrait, draw_portrait
from PIL import Image

from deployments.common.errors import NotCompliant
from deployments.faces.types import Face
from deployments.idphoto.geometry import warp_to_output
from deployments.idphoto.params import hex_to_rgb, parse_params
from deployments.idphoto.pipeline import make_id_photo

OUTPUT_DIR = Path(__file__).resolve().parents[3] / "test-output" / "idphoto"
RED = hex_to_rgb("#d74532")
# Output pixels this far (or nearer) from the true person may be blended edge pixels.
EDGE_PX = 3


def cut(portrait: SyntheticPortrait, *, top: int = 0, left: int = 0, right: int = 0) -> SyntheticPortrait:
    """The portrait with ``top``/``left``/``right`` pixels cut off its borders (the face moved with them)."""
    height, width = portrait.mask.shape
    rows, cols = slice(top, height), slice(left, width - right)
    shift = np.array([left, top], dtype=np.float32)
    face = portrait.face
    moved = Face(
        box=(face.box[0] - left, face.box[1] - top, face.box[2] - left, face.box[3] - top),
        score=face.score,
        landmarks=face.landmarks - shift,
        roll_deg=face.roll_deg,
        chin=(face.chin[0] - left, face.chin[1] - top),
    )
    return SyntheticPortrait(
        np.ascontiguousarray(portrait.rgb[rows, cols]),
        np.ascontiguousarray(portrait.mask[rows, cols]),
        moved,
        portrait.crown_y - top,
        portrait.chin_y - top,
    )


def make(portrait: SyntheticPortrait, mask_for_matte: np.ndarray | None = None, **options):
    """The photo as RGB, the outcome, and the true person in the output's pixels."""
    low_source = portrait if mask_for_matte is None else dataclasses.replace(portrait, mask=mask_for_matte)
    params = parse_params({"format": "png", "background": "red", **options})
    outcome = make_id_photo(portrait.rgb, [portrait.face], low_source.low_matte(), params)
    photo = np.asarray(Image.open(io.BytesIO(outcome.photo)).convert("RGB"))
    truth = cv2.warpAffine(
        portrait.mask, outcome.framing.affine, outcome.framing.size_wh, flags=cv2.INTER_LINEAR, borderValue=0
    )
    return photo, outcome, truth


def outside_person(truth: np.ndarray) -> np.ndarray:
    return cv2.dilate((truth > 0).astype(np.uint8), np.ones((2 * EDGE_PX + 1,) * 2, np.uint8)) == 0


def save(stem: str, source: np.ndarray, photo: np.ndarray) -> None:
    height = photo.shape[0]
    scaled = cv2.resize(source, (round(source.shape[1] * height / source.shape[0]), height), cv2.INTER_AREA)
    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.concatenate([scaled, photo], axis=1)).save(OUTPUT_DIR / f"{stem}.png")


def assert_follows_the_standard(outcome, *, unless_cut: bool) -> None:
    report = outcome.report
    offset = report.check("horizontal_offset")
    assert offset.passed and abs(offset.value) <= 0.02, report.to_json()
    named = {"head_cropped_in_source", "shoulders_cropped_in_source"} & set(report.reason_codes)
    if not (unless_cut and named):
        assert report.check("head_height_ratio").passed, report.to_json()
        assert report.check("top_margin_ratio").passed, report.to_json()


def test_subject_on_a_known_background_is_on_the_requested_colour_everywhere_else(portrait):
    photo, outcome, truth = make(portrait)
    assert (photo[outside_person(truth)] == RED).all()
    assert_follows_the_standard(outcome, unless_cut=False)
    assert outcome.report.verdict == "pass", outcome.report.reasons
    save("composite_known_background", portrait.rgb, photo)


def test_a_source_tilted_30_degrees_and_cut_at_a_side_shows_background_beyond_it():
    tilted = cut(draw_portrait(roll_deg=30.0), left=330)
    photo, outcome, truth = make(tilted)
    assert outcome.framing.padding["total"] > 0.05  # the frame reaches beyond the source
    assert (photo[outside_person(truth)] == RED).all()  # no stretched source edge anywhere
    assert_follows_the_standard(outcome, unless_cut=True)
    report = outcome.report
    assert {"head_cropped_in_source", "shoulders_cropped_in_source"} & set(report.reason_codes), report.to_json()
    assert report.advice, report.to_json()
    with pytest.raises(NotCompliant):
        make(tilted, strict=True)
    save("composite_tilted_30_cut_left", tilted.rgb, photo)


def test_a_head_cut_by_the_top_edge_is_reported_refused_by_strict_and_leaves_the_frame_softly(portrait):
    cut_top = cut(portrait, top=int(portrait.crown_y) + 30)
    photo, outcome, truth = make(cut_top)
    report = outcome.report
    assert "head_cropped_in_source" in report.reason_codes and not report.check("head_cropped_in_source").passed
    assert report.advice and "further away" in report.advice[0]
    assert (photo[outside_person(truth)] == RED).all()
    assert outcome.framing.padding["top"] == 0.0  # the hair leaves the frame instead of ending in a line
    with pytest.raises(NotCompliant) as refused:
        make(cut_top, strict=True)
    assert "head_cropped_in_source" in refused.value.details["report"]["reason_codes"]
    save("composite_head_cut_at_top", cut_top.rgb, photo)


def test_shoulders_cut_by_the_source_fade_into_the_background_and_are_reported(portrait):
    short = cut(draw_portrait(height_px=1000))
    photo, outcome, truth = make(short)
    assert outcome.report.check("shoulders_cropped_in_source").value == 1.0, outcome.report.to_json()
    assert (photo[outside_person(truth)] == RED).all()
    column = photo[:, photo.shape[1] // 2].astype(int)
    below = np.nonzero((np.abs(column - RED).sum(axis=1) == 0)[int(outcome.framing.chin_out[1]) :])[0]
    assert below.size > 0  # the frame's bottom band is background
    first_bg = int(outcome.framing.chin_out[1]) + int(below[0])
    steps = np.abs(np.diff(column[first_bg - 12 : first_bg + 1], axis=0)).sum(axis=1)
    assert steps.max() < 0.5 * np.abs(column[first_bg - 12] - column[first_bg]).sum()  # a fade, not one step
    save("composite_shoulders_cut", short.rgb, photo)


@pytest.mark.parametrize("thing", ["door frame", "chair back", "neighbour's shoulder"])
def test_an_object_touching_the_person_that_the_matte_marks_becomes_background(portrait, thing):
    """The model marks an object touching the person (its matte holds both): the photo shows the person, and of the
    object at most a stub at the contact, never anything beyond the protrusion bound (0.25 face widths)."""
    height, width = portrait.mask.shape
    cx, cy = portrait.face.landmarks[:2].mean(axis=0)
    extra = np.zeros_like(portrait.mask)
    if thing == "door frame":  # a vertical post touching the head's side, behind the shoulder below
        cv2.rectangle(extra, (int(cx + 165), 0), (int(cx + 235), height), 255, -1)
    elif thing == "chair back":  # a post of the chair's back rising behind the shoulder
        cv2.rectangle(extra, (int(cx + 260), int(cy + 120)), (int(cx + 310), int(cy + 400)), 255, -1)
    else:  # another person's shoulder touching this one's at the image's left
        cv2.ellipse(extra, (int(cx - 410), int(cy + 230)), (110, 150), 0, 0, 360, 255, -1)
    behind = (extra > 0) & (portrait.mask == 0)
    rgb = np.where(behind[..., None], np.array([110, 70, 40], np.uint8), portrait.rgb)
    scene = dataclasses.replace(portrait, rgb=np.ascontiguousarray(rgb))
    photo, outcome, truth = make(scene, mask_for_matte=np.maximum(portrait.mask, extra), spec="us-passport")
    thing_out = (warp_to_output(extra, outcome.framing.affine, outcome.framing.size_wh) > 127) & (truth < 128)
    assert thing_out.sum() > 2000, "the object is in the frame"
    from_person = cv2.distanceTransform((truth < 128).astype(np.uint8), cv2.DIST_L2, 5)
    face_width_out = (portrait.face.box[2] - portrait.face.box[0]) * outcome.framing.scale
    beyond = thing_out & (from_person > 0.25 * face_width_out)
    assert beyond.sum() > 500 and (photo[beyond] == RED).all()
    shown = thing_out & (photo != RED).any(axis=2)
    assert shown.sum() <= 0.35 * thing_out.sum(), (shown.sum(), thing_out.sum())
    assert (photo[outside_person(np.maximum(truth, thing_out.astype(np.uint8) * 255))] == RED).all()
    save(f"composite_touching_{thing.split()[0].replace(chr(39), '')}", scene.rgb, photo)


def couple() -> tuple[SyntheticPortrait, list[Face]]:
    """Two people side by side (each a drawn portrait 700 px wide), and both their faces."""
    left, right = (draw_portrait(width_px=700, centre_xy=(350.0, 700.0)) for _ in range(2))
    shift = np.array([700.0, 0.0], dtype=np.float32)
    face = right.face
    moved = Face(
        box=(face.box[0] + 700, face.box[1], face.box[2] + 700, face.box[3]),
        score=face.score,
        landmarks=face.landmarks + shift,
        roll_deg=face.roll_deg,
        chin=(face.chin[0] + 700, face.chin[1]),
    )
    both = SyntheticPortrait(
        np.ascontiguousarray(np.concatenate([left.rgb, right.rgb], axis=1)),
        np.ascontiguousarray(np.concatenate([left.mask, right.mask], axis=1)),
        left.face,
        left.crown_y,
        left.chin_y,
    )
    return both, [left.face, moved]


def test_the_marriage_photo_frames_both_people_on_red_and_needs_two_faces():
    both, faces = couple()
    params = parse_params({"spec": "cn-marriage", "format": "png"})
    outcome = make_id_photo(both.rgb, faces, both.low_matte(), params)
    photo = np.asarray(Image.open(io.BytesIO(outcome.photo)).convert("RGB"))
    assert photo.shape[:2] == (413, 626)
    report = outcome.report
    assert report.check("face_count").passed and report.face_count == 2, report.to_json()
    assert abs(report.check("horizontal_offset").value) <= 0.02, report.to_json()
    assert report.verdict == "pass", report.reasons
    truth = cv2.warpAffine(both.mask, outcome.framing.affine, (626, 413), flags=cv2.INTER_LINEAR, borderValue=0)
    assert (photo[outside_person(truth)] == RED).all()
    for face in faces:  # both faces wholly inside the frame
        box = np.array([[face.box[0], face.box[1]], [face.box[2], face.box[3]]])
        corners = cv2.transform(box[None].astype(np.float64), outcome.framing.affine)[0]
        assert (corners >= 0).all() and (corners[:, 0] <= 626).all() and (corners[:, 1] <= 413).all()
    save("marriage_two_people", both.rgb, photo)
    alone = make_id_photo(both.rgb, faces[:1], both.low_matte(), params)
    assert alone.report.reason_codes[0] == "face_count" and "exactly 2" in alone.report.reasons[0]
    assert "2" in alone.report.advice[0]


def test_the_report_speaks_chinese_when_asked(portrait):
    cut_top = cut(portrait, top=int(portrait.crown_y) + 30)
    _, outcome, _ = make(cut_top, lang="zh-CN", brightness_strength=10, horizontal_flip=True)
    report = outcome.report.to_json()
    assert report["lang"] == "zh"
    reason = report["reasons"][report["reason_codes"].index("head_cropped_in_source")]
    assert reason.startswith("原照片在上边缘截断了头部"), reason
    assert report["advice"][0].startswith("请离远一些重拍"), report["advice"]
    assert (
        "已美颜（仅人物）：brightness_strength=10" in report["notes"]
        and "已水平翻转（horizontal_flip）" in report["notes"]
    )
    assert all(any("\u4e00" <= ch <= "\u9fff" for ch in text) for text in report["reasons"] + report["notes"])
