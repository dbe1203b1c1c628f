"""Touch-ups, mirror, watermark, HD copy and custom sheets through the whole pipeline: each one's effect measured on
the person, the background exact, and every neutral value bit-identical to not asking."""

from __future__ import annotations

import io
from pathlib import Path
from typing import get_args

import cv2
import numpy as np
import pytest
from idphoto_samples import SyntheticPortrait, draw_portrait
from PIL import Image
from skimage import data as skdata

from deployments.common.errors import InvalidParameter
from deployments.idphoto import watermark
from deployments.idphoto.background import BACKDROPS, Backdrop, draw_backdrop, fit_background
from deployments.idphoto.params import parse_params
from deployments.idphoto.pipeline import IdPhotoOutcome, make_id_photo
from deployments.idphoto.touchup import Touchups, touch_up

BLUE = np.array([0x62, 0x8B, 0xCE])
NEUTRAL = {
    "whitening_strength": 0,
    "brightness_strength": 0,
    "contrast_strength": 0,
    "saturation_strength": 0,
    "sharpen_strength": 0,
    "horizontal_flip": False,
    "hd": False,
}


@pytest.fixture(scope="module")
def textured() -> SyntheticPortrait:
    """The synthetic portrait with skin and clothes textured (sharpening needs detail) and a red badge on the
    image-left shoulder (a mirror must move it)."""
    base = draw_portrait()
    rng = np.random.default_rng(1)
    noise = cv2.GaussianBlur(rng.normal(0, 14, base.rgb.shape[:2]).astype(np.float32), (0, 0), 1.2)
    rgb = np.clip(base.rgb.astype(np.float32) + (base.mask > 0)[..., None] * noise[..., None], 0, 255)
    rgb = rgb.astype(np.uint8)
    cv2.rectangle(rgb, (300, 1250), (360, 1300), (220, 30, 30), -1)
    return SyntheticPortrait(rgb, base.mask, base.face, base.crown_y, base.chin_y)


def run(portrait: SyntheticPortrait, **options) -> IdPhotoOutcome:
    params = parse_params({"format": "png", "background": "blue", **options})
    return make_id_photo(portrait.rgb, [portrait.face], portrait.low_matte(), params)


def pixels(data: bytes, mode: str = "RGB") -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert(mode))


def person_alpha(portrait: SyntheticPortrait, **options) -> np.ndarray:
    return pixels(run(portrait, background="transparent", **options).photo, "RGBA")[..., 3]


def lab(rgb: np.ndarray) -> np.ndarray:
    return cv2.cvtColor(rgb, cv2.COLOR_RGB2LAB).astype(np.float64)


@pytest.fixture(scope="module")
def plain(textured) -> np.ndarray:
    return pixels(run(textured).photo)


@pytest.fixture(scope="module")
def alpha(textured) -> np.ndarray:
    return person_alpha(textured)


def test_touch_up_with_neutral_sliders_returns_its_input_object():
    image = skdata.astronaut().astype(np.float32) / 255.0
    assert touch_up(image, Touchups()) is image


@pytest.mark.parametrize("name", sorted(NEUTRAL))
def test_each_neutral_value_leaves_the_photo_bit_identical(textured, name):
    assert run(textured, **{name: NEUTRAL[name]}).photo == run(textured).photo


def test_all_neutral_values_together_leave_the_photo_bit_identical(textured):
    assert run(textured, **NEUTRAL).photo == run(textured).photo


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("brightness_strength", 20),
        ("contrast_strength", 40),
        ("saturation_strength", 50),
        ("sharpen_strength", 5),
        ("whitening_strength", 15),
    ],
)
def test_touch_ups_leave_every_background_pixel_the_exact_colour(textured, plain, alpha, option, value):
    touched = pixels(run(textured, **{option: value}).photo)
    background = alpha == 0
    assert background.mean() > 0.3
    assert (touched[background] == BLUE).all()
    assert (plain[background] == BLUE).all()
    assert not np.array_equal(touched[alpha == 255], plain[alpha == 255])


def test_brightness_raises_the_persons_mean_lightness(textured, plain, alpha):
    brighter = pixels(run(textured, brightness_strength=20).photo)
    person = alpha == 255
    gain = lab(brighter)[person, 0].mean() - lab(plain)[person, 0].mean()
    assert 10 < gain < 30  # +20 of 255 on every channel: about +8 % lightness, 20 in OpenCV's 0..255 L


def test_negative_brightness_darkens_the_person(textured, plain, alpha):
    darker = pixels(run(textured, brightness_strength=-20).photo)
    person = alpha == 255
    assert lab(darker)[person, 0].mean() < lab(plain)[person, 0].mean() - 10


def test_contrast_widens_the_persons_lightness_spread(textured, plain, alpha):
    stronger = pixels(run(textured, contrast_strength=40).photo)
    person = alpha == 255
    assert lab(stronger)[person, 0].std() > 1.1 * lab(plain)[person, 0].std()  # a gain: bright skin clips at 255


def test_saturation_raises_the_persons_chroma(textured, plain, alpha):
    person = alpha == 255

    def chroma(rgb: np.ndarray) -> float:
        values = lab(rgb)[person]
        return float(np.hypot(values[:, 1] - 128, values[:, 2] - 128).mean())

    assert chroma(pixels(run(textured, saturation_strength=50).photo)) > 1.2 * chroma(plain)
    assert chroma(pixels(run(textured, saturation_strength=-50).photo)) < 0.8 * chroma(plain)


def test_sharpen_raises_high_frequency_energy_inside_the_person(textured, plain, alpha):
    inside = cv2.erode((alpha == 255).astype(np.uint8), np.ones((7, 7), np.uint8)) > 0

    def energy(rgb: np.ndarray) -> float:
        grey = cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY).astype(np.float64)
        return float((cv2.Laplacian(grey, cv2.CV_64F)[inside] ** 2).mean())

    assert energy(pixels(run(textured, sharpen_strength=2).photo)) > 1.5 * energy(plain)
    assert energy(pixels(run(textured, sharpen_strength=5).photo)) > energy(
        pixels(run(textured, sharpen_strength=2).photo)
    )


def test_whitening_lightens_the_skin_and_keeps_black_and_white(textured, plain):
    outcome = run(textured, whitening_strength=10)
    eyes = outcome.framing.eyes_out
    cheek_x, cheek_y = int(eyes[:, 0].mean()), int(eyes[:, 1].mean() + 0.6 * abs(eyes[1, 0] - eyes[0, 0]))
    window = (slice(cheek_y - 6, cheek_y + 6), slice(cheek_x - 6, cheek_x + 6))
    whiter = pixels(outcome.photo)
    assert lab(whiter[window])[..., 0].mean() > lab(plain[window])[..., 0].mean() + 5
    stronger = pixels(run(textured, whitening_strength=25).photo)
    assert lab(stronger[window])[..., 0].mean() > lab(whiter[window])[..., 0].mean()
    extremes = np.array([[[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]], dtype=np.float32)
    assert np.allclose(touch_up(extremes, Touchups(whitening_strength=30)), extremes, atol=1e-6)


def test_horizontal_flip_mirrors_the_photo(textured, plain):
    flipped = pixels(run(textured, horizontal_flip=True).photo)
    difference = np.abs(flipped.astype(int) - plain[:, ::-1].astype(int))
    assert difference.mean() < 0.5 and np.percentile(difference, 99.5) <= 6
    assert not np.array_equal(flipped, plain)  # the badge moved to the other shoulder
    outcome = run(textured, horizontal_flip=True)
    assert outcome.report.check("horizontal_offset").passed
    assert "mirrored (horizontal_flip)" in outcome.report.notes


def test_watermark_blends_its_colour_at_the_given_opacity(textured, plain):
    outcome = run(textured, watermark_text="SAMPLE", watermark_color="#ff0000", watermark_opacity=0.4)
    marked = pixels(outcome.photo).astype(int)
    changed = np.abs(marked - plain.astype(int)).max(axis=2) > 0
    assert 0.05 < changed.mean() < 0.6
    background = np.all(plain == BLUE, axis=2)
    full = background & (np.abs(marked - (0.6 * BLUE + 0.4 * np.array([255, 0, 0]))).max(axis=2) <= 1)
    # fully covered background pixels are exactly 40 % red over the blue (how many depends on the font's strokes:
    # 67 with Noto Sans CJK, the font CI installs; more with DejaVu's wider ones)
    assert full.sum() > 30
    assert (np.abs(marked[background] - BLUE) <= np.abs(0.4 * (np.array([255, 0, 0]) - BLUE)) + 1).all()
    assert outcome.report.verdict == run(textured).report.verdict  # judged without the watermark


@pytest.mark.parametrize("angle", [0.0, 30.0, 90.0])
def test_watermark_rows_run_at_the_given_angle(textured, plain, angle):
    outcome = run(textured, watermark_text="SAMPLE", watermark_angle=angle, watermark_opacity=1.0, watermark_space=30)
    coverage = (np.abs(pixels(outcome.photo).astype(int) - plain.astype(int)).max(axis=2) > 0).astype(np.float32)
    height, width = coverage.shape
    upright = cv2.warpAffine(coverage, cv2.getRotationMatrix2D((width / 2, height / 2), -angle, 1.0), (width, height))
    core = upright[height // 4 : 3 * height // 4, width // 4 : 3 * width // 4]
    # Rotated back, the text lies in horizontal rows separated by empty bands: the row profile swings far more.
    assert core.mean(axis=1).std() > 1.5 * core.mean(axis=0).std()


def test_hd_copy_has_the_specs_aspect_and_the_same_look(textured, plain):
    outcome = run(textured, hd=True)
    assert outcome.photo == run(textured).photo  # the photo itself is unchanged by asking for HD
    hd = pixels(outcome.hd.data)
    height, width = hd.shape[:2]
    assert (width, height) == outcome.hd.size_wh and min(width, height) >= 600
    assert abs(width / height - 295 / 413) < 0.003
    assert outcome.hd.dpi == pytest.approx(300 * width / 295, abs=0.01)
    assert Image.open(io.BytesIO(outcome.hd.data)).info["dpi"][0] == pytest.approx(outcome.hd.dpi, abs=0.1)
    small = cv2.resize(hd, (295, 413), interpolation=cv2.INTER_AREA)
    assert np.abs(small.astype(int) - plain.astype(int)).mean() < 4
    assert outcome.to_json()["hd"] == {
        "width": width,
        "height": height,
        "dpi": outcome.hd.dpi,
        "bytes": len(outcome.hd.data),
    }


def test_custom_layout_sheet_has_its_canvas_pixels_and_dpi(textured):
    outcome = run(textured, layout="custom", canvas_width_mm=102, canvas_height_mm=152, canvas_dpi=400, gap_mm=3)
    sheet = Image.open(io.BytesIO(outcome.sheet))
    assert sorted(sheet.size) == [1606, 2394]  # 102 x 152 mm at 400 DPI
    assert sheet.info["dpi"] == pytest.approx((400, 400), abs=0.05)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"brightness_strength": 80}, "brightness_strength"),
        ({"contrast_strength": -150}, "contrast_strength"),
        ({"saturation_strength": 101}, "saturation_strength"),
        ({"sharpen_strength": 6}, "sharpen_strength"),
        ({"whitening_strength": -1}, "whitening_strength"),
        ({"horizontal_flip": "sideways"}, "horizontal_flip"),
        ({"hd": "maybe"}, "hd"),
        ({"watermark_text": "x", "watermark_opacity": 1.5}, "watermark_opacity"),
        ({"watermark_text": "x", "watermark_color": "sunset"}, "watermark_color"),
        ({"watermark_text": "x", "watermark_color": "transparent"}, "watermark_color"),
        ({"layout": "7r"}, "layout"),
        ({"layout": "custom", "canvas_width_mm": 10, "canvas_height_mm": 100}, "canvas_width_mm"),
        ({"layout": "custom", "canvas_width_mm": 100, "canvas_height_mm": 100, "canvas_dpi": 2000}, "canvas_dpi"),
    ],
)
def test_bad_look_values_are_refused_naming_the_field(fields, field):
    with pytest.raises(InvalidParameter) as raised:
        parse_params(fields)
    assert raised.value.http_status == 422
    assert [problem["field"] for problem in raised.value.details["problems"]] == [field]


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"layout": "custom", "canvas_width_mm": 100}, "canvas_width_mm and canvas_height_mm"),
        ({"layout": "6inch", "gap_mm": 2}, "gap_mm apply to layout=custom only"),
        ({"layout": "custom", "canvas_width_mm": 600, "canvas_height_mm": 600, "canvas_dpi": 600}, "print sheet"),
        ({"width_px": 60, "height_px": 4000, "hd": True}, "HD copy"),
    ],
)
def test_inconsistent_look_options_are_refused_saying_why(fields, words):
    with pytest.raises(InvalidParameter, match=words):
        parse_params(fields)


def test_watermark_falls_back_to_pillows_font_when_no_font_is_installed(monkeypatch):
    monkeypatch.setattr(watermark, "FONT_CANDIDATES", ("/nonexistent/font.ttf",))
    watermark.load_font.cache_clear()
    try:
        grey = np.full((120, 100, 3), 128, np.uint8)
        marked = watermark.draw_watermark(grey, watermark.Watermark("ID 证件", opacity=1.0))
    finally:
        watermark.load_font.cache_clear()
    assert marked.font == watermark.BUILTIN_FONT
    assert (marked.rgb != grey).any()


def test_chinese_watermark_uses_a_cjk_font_when_one_is_installed():
    cjk = [path for path in watermark.FONT_CANDIDATES[:-1] if Path(path).is_file()]
    if not cjk:
        pytest.skip("no CJK font installed (Debian: apt-get install fonts-noto-cjk)")
    grey = np.full((200, 160, 3), 128, np.uint8)
    marked = watermark.draw_watermark(grey, watermark.Watermark("仅供办证使用", opacity=1.0))
    assert marked.font == Path(cjk[0]).name
    assert (marked.rgb != grey).any()


def test_fit_background_covers_the_photo_without_stretching():
    picture = np.zeros((100, 400, 3), np.uint8)
    picture[:, :, 0] = np.arange(400, dtype=np.uint8)[None, :] // 2  # red rises left to right
    picture[40:60, 190:210] = (0, 255, 0)  # a green square at the centre
    fitted = fit_background(picture, (60, 120))  # 1.2 x: 120 high, 480 wide, the middle 60 columns kept
    assert fitted.shape == (120, 60, 3) and fitted.dtype == np.float32
    centre = (fitted[60, 30] * 255).round()
    assert centre[1] == 255 and centre[0] == 0
    assert abs(fitted[10, 0, 0] * 255 - (210 / 1.2) / 2) < 3  # no squeeze: column 0 is source column ~175


def test_a_background_picture_replaces_the_colour_behind_the_person_only(textured, alpha):
    picture = cv2.resize(skdata.coffee(), (640, 427))
    outcome = make_id_photo(
        textured.rgb,
        [textured.face],
        textured.low_matte(),
        parse_params({"format": "png", "brightness_strength": 20, "hd": True}),
        background_image=picture,
    )
    photo = pixels(outcome.photo)
    expected = np.clip(fit_background(picture, (295, 413)) * 255.0 + 0.5, 0, 255).astype(np.uint8)
    background = alpha == 0
    assert (photo[background] == expected[background]).all()
    assert not (photo[alpha == 255] == expected[alpha == 255]).all(axis=1).any()
    hd = pixels(outcome.hd.data)
    small = cv2.resize(hd, (295, 413), interpolation=cv2.INTER_AREA)
    assert np.abs(small.astype(int) - photo.astype(int)).mean() < 6


def test_characters_the_font_cannot_draw_are_named_in_the_note(monkeypatch):
    latin_only = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
    if not Path(latin_only).is_file():
        pytest.skip("DejaVu Sans is not installed")
    monkeypatch.setattr(watermark, "FONT_CANDIDATES", (latin_only,))
    watermark.load_font.cache_clear()
    try:
        grey = np.full((120, 100, 3), 128, np.uint8)
        mixed = watermark.draw_watermark(grey, watermark.Watermark("ID 证件 ID", opacity=0.5))
        latin = watermark.draw_watermark(grey, watermark.Watermark("ID ONLY", opacity=0.5))
    finally:
        watermark.load_font.cache_clear()
    assert (mixed.font, mixed.missing_glyphs, latin.missing_glyphs) == ("DejaVuSans.ttf", "证件", "")
    assert mixed.note == (
        "watermark drawn with DejaVuSans.ttf (the report judges the photo without it); "
        "it has no glyphs for '证件' (install fonts-noto-cjk on the server)"
    )


def test_every_backdrop_preset_is_drawn_and_offered():
    assert set(get_args(Backdrop)) == set(BACKDROPS)
    for name in BACKDROPS:
        picture = draw_backdrop(name)
        assert picture.shape == (800, 600, 3) and not picture.flags.writeable
        assert picture.std() > 3  # lit and mottled, not a flat colour
        assert np.array_equal(picture, draw_backdrop.__wrapped__(name))  # the same pixels every time


def test_a_backdrop_preset_goes_behind_the_person_on_every_path(textured, alpha):
    outcome = run(textured, background=None, background_image="studio-grey")
    photo = pixels(outcome.photo)
    expected = np.clip(fit_background(draw_backdrop("studio-grey"), (295, 413)) * 255.0 + 0.5, 0, 255)
    background = alpha == 0
    assert (photo[background] == expected.astype(np.uint8)[background]).all()


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"background_image": "beach"}, "background_image"),
        ({"background_image": "studio-blue", "background": "red"}, "exclude each other"),
        ({"background_image": "studio-blue", "render": "radial"}, "render=radial"),
    ],
)
def test_bad_backdrop_requests_are_refused(fields, words):
    with pytest.raises(InvalidParameter, match=words):
        parse_params(fields)
