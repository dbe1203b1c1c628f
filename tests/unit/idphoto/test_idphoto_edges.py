"""Edge quality with a known answer: a portrait composited onto a known green background, then made into an ID photo
on white. Two numbers per matting mode, in output pixels:

- mean absolute alpha error, over the whole photo and in the band within 6 px of the true edge;
- halo width: how far from the true subject the old (green) background still shows in the result.

The true alpha is MODNet's matte of the original photo (official geometry, resized back). It is realistic (hair,
soft edges) but it is MODNet's own answer, so the MODNet error measures what compositing onto another background,
framing and resampling lose, and the selfie error its distance from MODNet; the halo needs no such caveat. Images
for a look go to ``test-output/idphoto/``: the composite, then the selfie and MODNet results, and the real eval
photos in both modes.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import cv2
import numpy as np
import pytest
from PIL import Image

from deployments.common.image import decode_image
from deployments.faces.analyze import FaceAnalysisPredictor
from deployments.idphoto.geometry import warp_to_output
from deployments.idphoto.params import parse_params
from deployments.idphoto.pipeline import make_id_photo

OUTPUT_DIR = Path(__file__).resolve().parents[3] / "test-output" / "idphoto"
EVAL_NAMES = ("hivision_test0.jpg", "hivision_test1.jpg", "hivision_test2.jpg")
EDGE_BAND_PX = 6
MAX_RING_PX = 30
HALO_GREENNESS = 12.0  # green minus max(red, blue), out of 255: clearly green, never skin, hair or white
MODES = ("selfie", "modnet")
RESULTS: dict[str, dict[str, dict[str, float]]] = {}


@pytest.fixture(scope="module")
def analyzer(mediapipe_dir) -> FaceAnalysisPredictor:
    return FaceAnalysisPredictor(mediapipe_dir)


def green_background(height: int, width: int) -> np.ndarray:
    """A textured chroma green (float RGB in [0, 1]): the old background whose leaks the halo measure finds."""
    rng = np.random.default_rng(7)
    texture = cv2.resize(rng.uniform(-1, 1, (12, 9)).astype(np.float32), (width, height), interpolation=cv2.INTER_CUBIC)
    base = np.array([40.0, 190.0, 70.0]) / 255.0
    return np.clip(base + 0.12 * texture[..., None] * np.array([0.3, 1.0, 0.4]), 0.0, 1.0).astype(np.float32)


def composite_onto_green(rgb: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    green = green_background(*alpha.shape)
    mixed = alpha[..., None] * (rgb.astype(np.float32) / 255.0) + (1.0 - alpha[..., None]) * green
    return np.clip(mixed * 255.0 + 0.5, 0, 255).astype(np.uint8)


def greenness(rgb: np.ndarray) -> np.ndarray:
    pixels = rgb.astype(np.float32)
    return pixels[..., 1] - np.maximum(pixels[..., 0], pixels[..., 2])


def halo_width_px(photo_rgb: np.ndarray, truth: np.ndarray) -> int:
    """Farthest ring (1 px wide, outside the true subject) whose 90th percentile of greenness is clearly green."""
    outside = (truth < 0.5).astype(np.uint8)
    distance = cv2.distanceTransform(outside, cv2.DIST_L2, 5)
    green = greenness(photo_rgb)
    width = 0
    for ring_px in range(1, MAX_RING_PX + 1):
        ring = (outside > 0) & (distance > ring_px - 1) & (distance <= ring_px)
        if ring.sum() >= 20 and np.percentile(green[ring], 90) > HALO_GREENNESS:
            width = ring_px
    return width


def edge_band(truth: np.ndarray) -> np.ndarray:
    inside = (truth >= 0.5).astype(np.uint8)
    near_outside = cv2.distanceTransform(1 - inside, cv2.DIST_L2, 5) <= EDGE_BAND_PX
    near_inside = cv2.distanceTransform(inside, cv2.DIST_L2, 5) <= EDGE_BAND_PX
    return near_outside & near_inside


def measure(matter, analyzer, rgb: np.ndarray, name: str) -> dict[str, dict[str, float]]:
    truth_full = matter.matte(rgb, "modnet")
    composite = composite_onto_green(rgb, truth_full)
    faces = analyzer.analyze(composite)
    assert faces, f"{name}: no face found in the composite"
    numbers: dict[str, dict[str, float]] = {}
    panels = [composite]
    for mode in MODES:
        clear = make_id_photo(
            composite, faces, matter, parse_params({"background": "transparent", "format": "png", "matting": mode})
        )
        alpha = np.asarray(Image.open(io.BytesIO(clear.photo)))[..., 3].astype(np.float32) / 255.0
        truth = warp_to_output(truth_full, clear.framing.affine, clear.framing.size_wh)
        white = make_id_photo(
            composite, faces, matter, parse_params({"background": "white", "format": "png", "matting": mode})
        )
        photo = np.asarray(Image.open(io.BytesIO(white.photo)).convert("RGB"))
        band = edge_band(truth)
        numbers[mode] = {
            "alpha_mae": round(float(np.abs(alpha - truth).mean()), 4),
            "edge_alpha_mae": round(float(np.abs(alpha - truth)[band].mean()), 4),
            "halo_width_px": halo_width_px(photo, truth),
        }
        panels.append(photo)
    save_panels(f"composite_{Path(name).stem}", panels)
    RESULTS[name] = numbers
    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    (OUTPUT_DIR / "edge_quality.json").write_text(json.dumps(RESULTS, indent=2) + "\n", encoding="utf-8")
    return numbers


def save_panels(stem: str, panels: list[np.ndarray]) -> None:
    """Side by side at the result's height: the input (scaled), then one result per mode."""
    height = panels[-1].shape[0]
    scaled = [cv2.resize(p, (round(p.shape[1] * height / p.shape[0]), height), cv2.INTER_AREA) for p in panels]
    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.concatenate(scaled, axis=1)).save(OUTPUT_DIR / f"{stem}.png")


def assert_clean_edges(numbers: dict[str, dict[str, float]], name: str) -> None:
    modnet = numbers["modnet"]
    assert modnet["halo_width_px"] <= 1, (name, numbers)
    assert modnet["edge_alpha_mae"] < 0.08 and modnet["alpha_mae"] < 0.02, (name, numbers)


def test_astronaut_on_green_has_clean_edges(matter, analyzer, astronaut_rgb):
    assert_clean_edges(measure(matter, analyzer, astronaut_rgb, "astronaut"), "astronaut")


@pytest.mark.eval
@pytest.mark.parametrize("name", EVAL_NAMES)
def test_eval_portraits_on_green_have_clean_edges(shared_dir, matter, analyzer, name):
    rgb = decode_image((shared_dir / "eval" / "idphoto" / name).read_bytes()).rgb
    assert_clean_edges(measure(matter, analyzer, rgb, name), name)


@pytest.mark.eval
@pytest.mark.parametrize("name", EVAL_NAMES)
def test_eval_portraits_before_and_after(shared_dir, matter, analyzer, name):
    """The real photos (their own backgrounds) in both modes, saved for a look; MODNet's must pass the report."""
    rgb = decode_image((shared_dir / "eval" / "idphoto" / name).read_bytes()).rgb
    faces = analyzer.analyze(rgb)
    photos = []
    for mode in MODES:
        outcome = make_id_photo(rgb, faces, matter, parse_params({"format": "png", "matting": mode}))
        photos.append(np.asarray(Image.open(io.BytesIO(outcome.photo)).convert("RGB")))
    assert outcome.report.verdict == "pass", outcome.report.reasons
    save_panels(f"eval_{Path(name).stem}", [rgb, *photos])


@pytest.mark.eval
def test_hair_cut_by_the_top_of_a_real_photo_leaves_the_frame(shared_dir, matter, analyzer):
    """A portrait whose hair the photo's top edge cuts: reported, refused by strict, and no straight hair line."""
    rgb = decode_image((shared_dir / "eval" / "idphoto" / "hivision_test0.jpg").read_bytes()).rgb
    low = matter.segment(rgb, "modnet")
    hair_top = int(np.nonzero((low.alpha >= 0.5).any(axis=1))[0][0] / low.affine[1, 1])
    cut = np.ascontiguousarray(rgb[hair_top + 40 :])  # 40 px of hair gone
    faces = analyzer.analyze(cut)
    outcome = make_id_photo(cut, faces, matter, parse_params({"background": "transparent", "format": "png"}))
    assert not outcome.report.check("head_cropped_in_source").passed
    assert outcome.framing.padding["top"] == 0.0
    rgba = np.asarray(Image.open(io.BytesIO(outcome.photo)))
    centre = rgba.shape[1] // 2
    assert rgba[0, centre - 10 : centre + 10, 3].min() > 200  # hair reaches the top edge, as in the source
    white = make_id_photo(cut, faces, matter, parse_params({"background": "white", "format": "png"}))
    save_panels("hair_cut_at_top", [cut, np.asarray(Image.open(io.BytesIO(white.photo)).convert("RGB"))])
