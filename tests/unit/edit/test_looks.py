"""The LOOK engine: every look of ``configs/looks.yaml`` changes the colours measurably (mean ΔE in CIELAB) and the
grain as it says, the same seed gives the same bytes, and a malformed looks file is refused naming it and why; the
face-scoped composition leaves every pixel outside the face mask bit-identical and ``identity_keep=1`` gives the face
back; the prompt's words pick a look and the refusal policy holds."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from skimage import color

from deployments.common.errors import InstructionRefused, InternalError
from deployments.edit.looks import Look, apply_look, default_looks, load_looks, monotone_curve
from deployments.edit.mask import face_mask
from deployments.edit.pipeline import FACE_DETAIL_SIGMA_E, LUMA, compose_edit, keep_face_detail
from deployments.edit.words import look_from_prompt, refuse_edit
from deployments.faces.types import Face

# Per look: (least mean ΔE from the photo, most mean ΔE, the grain's least rise of the high-pass deviation of the
# gray photo in gray levels, or None when the look's grain is not the point; a negative bound is a fall it may have:
# a soft, faded print loses detail). Measured on skimage's astronaut at seed 1 (docs/BENCHMARKS.md).
EXPECTED = {
    "hk80s": (8.0, 20.0, -2.5),
    "portra": (4.0, 12.0, -1.5),
    "fuji": (2.5, 9.0, -0.5),
    "bw": (15.0, 30.0, 1.0),
    "faded": (12.0, 25.0, -4.5),
    "teal-orange": (8.0, 20.0, 2.0),
    "grain": (4.0, 12.0, 0.4),
    "texture": (3.0, 10.0, 5.0),
}


def high_pass_std(rgb: np.ndarray) -> float:
    gray = cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY).astype(np.float32)
    return float((gray - cv2.GaussianBlur(gray, (0, 0), 2.0)).std())


def mean_delta_e(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.sqrt(((color.rgb2lab(a) - color.rgb2lab(b)) ** 2).sum(-1)).mean())


def test_the_shipped_looks_are_the_ones_measured_here():
    assert set(default_looks()) == set(EXPECTED)
    for look in default_looks().values():
        assert look.title_zh and look.title_en and look.words


@pytest.mark.parametrize("name", list(EXPECTED))
def test_each_look_changes_the_colours_and_the_grain_as_it_says(astronaut_rgb, name):
    look = default_looks()[name]
    out = apply_look(astronaut_rgb, look, seed=1)
    assert out.shape == astronaut_rgb.shape and out.dtype == np.uint8
    low, high, grain_rise = EXPECTED[name]
    assert low <= mean_delta_e(astronaut_rgb, out) <= high
    assert high_pass_std(out) - high_pass_std(astronaut_rgb) >= grain_rise
    assert np.array_equal(out, apply_look(astronaut_rgb, look, seed=1))  # deterministic given the seed
    if look.grain is not None:
        assert not np.array_equal(out, apply_look(astronaut_rgb, look, seed=2))


@pytest.mark.parametrize("name", [name for name, look in default_looks().items() if look.grain is not None])
def test_each_looks_grain_has_the_deviation_it_declares_on_a_flat_grey(name):
    """On a flat mid-grey of 2000 px (grains of a pixel or more: no averaging), the noise's deviation is the look's
    ``grain.amount`` (in gray levels, midtone weight 1), before its tone curve's slope and the vignette."""
    look = default_looks()[name]
    flat_look = look.model_copy(update={"vignette": 0.0, "halation": None, "clarity": 0.0})
    grey = np.full((2000, 2000, 3), 128, np.uint8)
    out = apply_look(grey, flat_look, seed=5).astype(np.float32)
    plain = apply_look(grey, flat_look.model_copy(update={"grain": None}), seed=5).astype(np.float32)
    measured = float((out - plain).mean(-1).std())
    declared = look.grain.amount * 255.0
    assert 0.5 * declared <= measured <= 1.6 * declared, (measured, declared)


def test_black_and_white_film_has_no_colour_left(astronaut_rgb):
    out = apply_look(astronaut_rgb, default_looks()["bw"], seed=0).astype(int)
    assert np.abs(out[..., 0] - out[..., 1]).max() <= 1 and np.abs(out[..., 1] - out[..., 2]).max() <= 1


def test_the_hk80s_look_is_warm_and_lifts_the_blacks(astronaut_rgb):
    out = apply_look(astronaut_rgb, default_looks()["hk80s"], seed=0)
    lab0, lab1 = color.rgb2lab(astronaut_rgb), color.rgb2lab(out)
    assert lab1[..., 1].mean() > lab0[..., 1].mean()  # redder (a*)
    dark = cv2.cvtColor(astronaut_rgb, cv2.COLOR_RGB2GRAY) < 20
    assert out[dark].mean() > astronaut_rgb[dark].mean() + 5


def test_tone_curves_are_monotone_and_pass_through_their_points():
    points = [(0.0, 0.1), (0.3, 0.2), (0.5, 0.55), (1.0, 0.9)]
    xs = np.linspace(0, 1, 1001)
    ys = monotone_curve(points, xs)
    assert np.all(np.diff(ys) >= -1e-12)
    assert np.allclose(monotone_curve(points, np.array([x for x, _ in points])), [y for _, y in points])


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("looks: {}\n", "defines no look"),
        ("looks: {a: {title_zh: 甲}}\n", "title_en"),
        ("looks: {a: {title_zh: 甲, title_en: A, saturation: 3}}\n", "saturation"),
        ("looks: {a: {title_zh: 甲, title_en: A, curves: {r: [[0.5, 0], [0.2, 1]]}}}\n", "must increase"),
        ("looks: {a: {title_zh: 甲, title_en: A, grian: {amount: 0.1}}}\n", "grian"),
        ("looks: [\n", "malformed"),
    ],
)
def test_a_malformed_looks_file_is_refused_naming_the_file_and_the_reason(tmp_path, text, reason):
    path = tmp_path / "looks.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InternalError, match=reason) as refused:
        load_looks(path)
    assert str(path) in refused.value.message


# --- the face mask and the composition ------------------------------------------------------------------------------


def a_face(box=(180.0, 40.0, 300.0, 190.0)) -> Face:
    x0, y0, x1, y1 = box
    eyes = [(x0 + 0.3 * (x1 - x0), y0 + 0.4 * (y1 - y0)), (x0 + 0.7 * (x1 - x0), y0 + 0.4 * (y1 - y0))]
    mouth = [(x0 + 0.35 * (x1 - x0), y0 + 0.8 * (y1 - y0)), (x0 + 0.65 * (x1 - x0), y0 + 0.8 * (y1 - y0))]
    landmarks = np.array([*eyes, ((x0 + x1) / 2, y0 + 0.6 * (y1 - y0)), *mouth], np.float32)
    return Face(box=box, score=0.9, landmarks=landmarks, roll_deg=0.0, chin=((x0 + x1) / 2, y1))


def test_scope_face_leaves_every_pixel_outside_the_mask_bit_identical(astronaut_rgb):
    styled = apply_look(astronaut_rgb, default_looks()["hk80s"], seed=3)
    mask = face_mask(astronaut_rgb.shape[:2], [a_face()])
    out = compose_edit(astronaut_rgb, styled, strength=1.0, region=mask, face=mask, identity_keep=0.0)
    outside = mask == 0
    assert outside.mean() > 0.8 and (mask == 1).sum() > 5000
    assert np.array_equal(out[outside], astronaut_rgb[outside])
    assert np.array_equal(out[mask == 1], styled[mask == 1])


def test_identity_keep_1_gives_the_face_region_back_unchanged(astronaut_rgb):
    styled = apply_look(astronaut_rgb, default_looks()["faded"], seed=3)
    mask = face_mask(astronaut_rgb.shape[:2], [a_face()])
    out = compose_edit(astronaut_rgb, styled, strength=1.0, region=None, face=mask, identity_keep=1.0)
    assert np.array_equal(out[mask == 1], astronaut_rgb[mask == 1])
    assert np.array_equal(out[mask == 0], styled[mask == 0])


def test_a_look_keeps_each_faces_own_fine_detail_and_leaves_the_rest_of_the_photo_as_the_look_made_it(astronaut_rgb):
    styled = apply_look(astronaut_rgb, default_looks()["grain"], seed=3)
    face = a_face()
    mask = face_mask(astronaut_rgb.shape[:2], [face])
    out = keep_face_detail(astronaut_rgb, styled, [face], mask)
    assert np.array_equal(out[mask == 0], styled[mask == 0])
    core = mask == 1
    sigma = FACE_DETAIL_SIGMA_E * face.eye_distance_px

    def detail(rgb):
        luma = rgb.astype(np.float32) @ LUMA
        return (luma - cv2.GaussianBlur(luma, (0, 0), sigma))[core]

    # the face's fine detail is the photo's (up to rounding and the clipped highlights), not the grain's
    assert (
        np.abs(detail(out) - detail(astronaut_rgb)).mean() < 1.0 < np.abs(detail(styled) - detail(astronaut_rgb)).mean()
    )
    smooth = cv2.GaussianBlur(out.astype(np.float32), (0, 0), 3 * sigma)[core]
    assert np.abs(smooth - cv2.GaussianBlur(styled.astype(np.float32), (0, 0), 3 * sigma)[core]).mean() < 2.0


def test_a_black_and_white_look_keeps_the_face_grey(astronaut_rgb):
    styled = apply_look(astronaut_rgb, default_looks()["bw"], seed=3)
    face = a_face()
    out = keep_face_detail(astronaut_rgb, styled, [face], face_mask(astronaut_rgb.shape[:2], [face]))
    assert np.abs(out.astype(int) - out[..., :1].astype(int)).max() <= 1  # R = G = B, up to rounding


def test_strength_0_keeps_the_photo(astronaut_rgb):
    styled = apply_look(astronaut_rgb, default_looks()["bw"], seed=3)
    out = compose_edit(astronaut_rgb, styled, strength=0.0, region=None, face=None, identity_keep=0.0)
    assert np.array_equal(out, astronaut_rgb)


def test_the_mask_follows_the_face_mesh_where_it_ran():
    face = a_face()
    ring = np.array([(240 + 50 * np.cos(t), 115 + 70 * np.sin(t)) for t in np.linspace(0, 2 * np.pi, 468)])
    meshed = Face(**{**face.__dict__, "mesh": ring.astype(np.float32)})
    mask = face_mask((300, 400), [meshed])
    assert mask[115, 240] == 1.0 and mask[115, 340] == 0.0 and mask[115, 285] < 1.0 and mask[10, 10] == 0.0


# --- words -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prompt", "look"),
    [
        ("让这张脸呈现80年代港风胶片质感", "hk80s"),
        ("80年代港风胶片质感", "hk80s"),
        ("给照片加点胶片颗粒感", "grain"),
        ("make it look like an old Kodak print", "faded"),
        ("Kodak Portra please", "portra"),
        ("富士胶片的感觉", "fuji"),
        ("做成黑白胶片", "bw"),
        ("cinematic teal and orange", "teal-orange"),
        ("让皮肤更有质感，保留皱纹", "texture"),
        ("hello", None),
    ],
)
def test_the_prompts_words_pick_the_look(prompt, look):
    assert look_from_prompt(prompt, default_looks()) == look


REFUSED = [
    ("把他变成白人", "change_ethnicity"),
    ("让她看起来像欧洲人", "change_ethnicity"),
    ("换个人种", "change_ethnicity"),
    ("make me look Asian", "change_ethnicity"),
    ("change his race", "change_ethnicity"),
    ("turn her into a black woman", "change_ethnicity"),
    ("把这个孩子变老一点", "minor_older"),
    ("make this child look older", "minor_older"),
    ("让小女孩看起来成熟", "minor_older"),
    ("把这个小女孩修得性感一点", "minor_sexualised"),
    ("make the kid sexy", "minor_sexualised"),
    ("teen girl in lingerie", "minor_sexualised"),
    ("make her naked", "undress"),
]
ALLOWED = [
    "让这张脸呈现80年代港风胶片质感",
    "给照片加点胶片颗粒感",
    "make it look like an old Kodak print",
    "让皮肤更有质感，保留皱纹",
    "孩子的照片加点胶片颗粒感",
    "she is nineteen, make it look cinematic",
    "Kodak Portra for my kid's birthday photo",
]


@pytest.mark.parametrize(("prompt", "code"), REFUSED)
def test_the_refusal_policy_refuses_with_a_reason_in_both_languages(prompt, code):
    with pytest.raises(InstructionRefused) as refused:
        refuse_edit(prompt)
    assert refused.value.code == "instruction_refused" and refused.value.http_status == 422
    details = refused.value.details
    assert details["reason_code"] == code and details["reason_en"] and details["reason_zh"]


@pytest.mark.parametrize("prompt", ALLOWED)
def test_ordinary_style_requests_pass_the_policy(prompt):
    refuse_edit(prompt)


def test_a_look_is_a_frozen_validated_record():
    with pytest.raises(ValueError):
        Look(name="x", title_zh="甲", title_en="A", fade=0.9)
