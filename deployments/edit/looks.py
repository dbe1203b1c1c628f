"""Film looks as data (``configs/looks.yaml``) and the non-neural LOOK engine that applies them: pure numpy/cv2, no
model, deterministic given a seed (the grain comes from ``numpy.random.default_rng(seed)``).

A look is applied in this order: colour matrix → tone curves and black lift (one 256-entry table per channel) →
saturation → clarity (local contrast) → halation → vignette → grain. The photo is worked in float32 (a 2 MP photo:
~24 MB per working array; the job's output cap ``EDIT_OUTPUT`` bounds it), the result rounded to the image contract
(HxWx3 uint8 RGB).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path

import cv2
import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from deployments.common.named_entries import load_named_entries

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_LOOKS_PATH = REPO_ROOT / "configs" / "looks.yaml"
GRAIN_REFERENCE_PX = 1000  # grain ``size`` is its sigma in px per this many px of the photo's short side
_LUMA = np.array([0.299, 0.587, 0.114], np.float32)  # BT.601, the weights of a gray photo everywhere in the service

CurvePoints = list[tuple[float, float]]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Grain(_Strict):
    amount: float = Field(ge=0.0, le=0.3)
    size: float = Field(1.0, gt=0.0, le=5.0)
    chroma: float = Field(0.0, ge=0.0, le=1.0)


class Halation(_Strict):
    threshold: float = Field(ge=0.0, le=1.0)
    radius: float = Field(gt=0.0, le=0.1)
    tint: tuple[float, float, float]
    amount: float = Field(ge=0.0, le=1.0)

    @field_validator("tint")
    @classmethod
    def _unit_colour(cls, tint: tuple[float, float, float]) -> tuple[float, float, float]:
        if not all(0.0 <= channel <= 1.0 for channel in tint):
            raise ValueError(f"tint channels must be in [0, 1], got {list(tint)}")
        return tint


class Curves(_Strict):
    rgb: CurvePoints | None = None
    r: CurvePoints | None = None
    g: CurvePoints | None = None
    b: CurvePoints | None = None

    @field_validator("rgb", "r", "g", "b")
    @classmethod
    def _a_curve(cls, points: CurvePoints | None) -> CurvePoints | None:
        if points is None:
            return None
        if len(points) < 2:
            raise ValueError("a curve needs at least two points")
        xs = [x for x, _ in points]
        if any(not 0.0 <= v <= 1.0 for point in points for v in point):
            raise ValueError(f"curve points must be in [0, 1], got {points}")
        if any(b <= a for a, b in zip(xs, xs[1:])):
            raise ValueError(f"curve x values must increase, got {xs}")
        return points


class Look(_Strict):
    """One film look (its fields: the header of ``configs/looks.yaml``)."""

    name: str
    title_zh: str = Field(min_length=1)
    title_en: str = Field(min_length=1)
    words: tuple[str, ...] = ()
    matrix: tuple[tuple[float, float, float], tuple[float, float, float], tuple[float, float, float]] | None = None
    curves: Curves = Curves()
    fade: float = Field(0.0, ge=0.0, le=0.4)
    saturation: float = Field(1.0, ge=0.0, le=2.0)
    clarity: float = Field(0.0, ge=0.0, le=1.0)
    halation: Halation | None = None
    vignette: float = Field(0.0, ge=0.0, le=1.0)
    vignette_softness: float = Field(0.6, ge=0.2, le=1.0)
    grain: Grain | None = None

    def to_json(self) -> dict:
        """``GET /v1/edit/looks``: the slug and its titles."""
        return {"name": self.name, "title": {"zh": self.title_zh, "en": self.title_en}}


def load_looks(path: Path | str = DEFAULT_LOOKS_PATH) -> dict[str, Look]:
    """Every look of ``path``, validated; a malformed file is refused at start-up naming the file and the reason."""
    return load_named_entries(path, "looks", Look, "look")


@functools.cache
def default_looks() -> Mapping[str, Look]:
    """The looks shipped in ``configs/looks.yaml``, loaded once per process."""
    return load_looks(DEFAULT_LOOKS_PATH)


# --- the engine --------------------------------------------------------------------------------------------------


def monotone_curve(points: CurvePoints, xs: np.ndarray) -> np.ndarray:
    """The monotone cubic (Fritsch–Carlson) through ``points`` at ``xs``; flat outside the points."""
    px, py = np.asarray(points, np.float64).T
    slopes = np.diff(py) / np.diff(px)
    tangents = np.empty_like(px)
    tangents[0], tangents[-1] = slopes[0], slopes[-1]
    tangents[1:-1] = np.where(slopes[:-1] * slopes[1:] > 0, (slopes[:-1] + slopes[1:]) / 2, 0.0)
    for i, slope in enumerate(slopes):  # keep each segment monotone
        if slope == 0:
            tangents[i] = tangents[i + 1] = 0.0
            continue
        a, b = tangents[i] / slope, tangents[i + 1] / slope
        if a * a + b * b > 9:
            scale = 3 / np.hypot(a, b)
            tangents[i], tangents[i + 1] = scale * a * slope, scale * b * slope
    x = np.clip(xs, px[0], px[-1])
    k = np.clip(np.searchsorted(px, x, side="right") - 1, 0, len(px) - 2)
    h = px[k + 1] - px[k]
    t = (x - px[k]) / h
    h00, h10, h01, h11 = 2 * t**3 - 3 * t**2 + 1, t**3 - 2 * t**2 + t, -2 * t**3 + 3 * t**2, t**3 - t**2
    return h00 * py[k] + h10 * h * tangents[k] + h01 * py[k + 1] + h11 * h * tangents[k + 1]


def tone_tables(look: Look) -> np.ndarray:
    """The curves and the black lift as one 256-entry table per channel (256x1x3 uint8, for ``cv2.LUT``)."""
    xs = np.linspace(0.0, 1.0, 256)
    master = monotone_curve(look.curves.rgb, xs) if look.curves.rgb else xs
    channels = []
    for points in (look.curves.r, look.curves.g, look.curves.b):
        y = monotone_curve(points, master) if points else master
        channels.append(look.fade + (1.0 - look.fade) * np.clip(y, 0.0, 1.0))
    return np.clip(np.rint(np.stack(channels, -1) * 255.0), 0, 255).astype(np.uint8)[:, None, :]


def apply_look(rgb: np.ndarray, look: Look, seed: int = 0) -> np.ndarray:
    """``rgb`` (HxWx3 uint8 RGB) in ``look``; the same photo, look and seed give the same bytes."""
    image = rgb
    if look.matrix is not None:
        image = cv2.transform(rgb.astype(np.float32), np.asarray(look.matrix, np.float32))
        image = np.clip(np.rint(image), 0, 255).astype(np.uint8)
    image = cv2.LUT(np.ascontiguousarray(image), tone_tables(look)).astype(np.float32) * (1.0 / 255.0)
    if look.saturation != 1.0:
        luma = (image @ _LUMA)[..., None]
        image = luma + look.saturation * (image - luma)
    short_px = min(rgb.shape[:2])
    if look.clarity:
        image = _clarity(image, look.clarity, short_px)
    if look.halation is not None and look.halation.amount:
        image = _halation(image, look.halation, short_px)
    if look.vignette:
        image *= _vignette(rgb.shape[:2], look.vignette, look.vignette_softness)[..., None]
    if look.grain is not None and look.grain.amount:
        image = _grain(image, look.grain, short_px, seed)
    return np.clip(np.rint(image * 255.0), 0, 255).astype(np.uint8)


def _clarity(image: np.ndarray, amount: float, short_px: int) -> np.ndarray:
    """Local contrast on the luminance: the detail above a blur of 1 % of the short side, amplified."""
    luma = image @ _LUMA
    blurred = cv2.GaussianBlur(luma, (0, 0), max(short_px * 0.01, 1.0))
    return image + (amount * 1.5 * (luma - blurred))[..., None]


def _halation(image: np.ndarray, halation: Halation, short_px: int) -> np.ndarray:
    """The highlights above ``threshold``, blurred (on a quarter-size copy: the glow is smooth) and tinted, screened
    over the photo."""
    luma = np.clip(image @ _LUMA, 0.0, 1.0)
    light = np.clip((luma - halation.threshold) / max(1.0 - halation.threshold, 1e-3), 0.0, 1.0)
    height, width = light.shape
    small = cv2.resize(light, (max(width // 4, 1), max(height // 4, 1)), interpolation=cv2.INTER_AREA)
    small = cv2.GaussianBlur(small, (0, 0), max(halation.radius * short_px / 4, 0.5))
    glow = cv2.resize(small, (width, height), interpolation=cv2.INTER_LINEAR)
    glow = glow[..., None] * (halation.amount * np.asarray(halation.tint, np.float32))
    return 1.0 - (1.0 - np.clip(image, 0.0, 1.0)) * (1.0 - glow)


def _vignette(shape: tuple[int, int], amount: float, softness: float) -> np.ndarray:
    """A radial gain: 1 inside ``1 - softness`` of the half-diagonal, down to ``1 - amount`` in the corners."""
    height, width = shape
    ys = (np.arange(height, dtype=np.float32) - (height - 1) / 2) / (height / 2)
    xs = (np.arange(width, dtype=np.float32) - (width - 1) / 2) / (width / 2)
    radius = np.sqrt(ys[:, None] ** 2 + xs[None, :] ** 2) / np.sqrt(2.0)
    start = 1.0 - softness
    t = np.clip((radius - start) / softness, 0.0, 1.0)
    return 1.0 - amount * (t * t * (3 - 2 * t))


def _grain(image: np.ndarray, grain: Grain, short_px: int, seed: int) -> np.ndarray:
    """Seeded gaussian grain, blurred to its size (its deviation kept), strongest in the midtones as on film. Where a
    grain is smaller than a pixel (a small photo), a pixel averages about 1/sigma² grains: the deviation falls with
    sigma, as a print of that size would show it."""
    rng = np.random.default_rng(seed)
    height, width = image.shape[:2]
    sigma = grain.size * short_px / GRAIN_REFERENCE_PX
    amount = grain.amount * min(1.0, sigma)
    mono = _sized_noise(rng, (height, width), sigma)[..., None]
    noise = mono
    if grain.chroma:
        colour = _sized_noise(rng, (height, width, 3), sigma)
        noise = (1.0 - grain.chroma) * mono + grain.chroma * colour
    luma = np.clip(image @ _LUMA, 0.0, 1.0)[..., None]
    weight = 0.4 + 2.4 * luma * (1.0 - luma)  # 1.0 at mid-grey, 0.4 at black and white
    return image + amount * weight * noise


def _sized_noise(rng: np.random.Generator, shape: tuple[int, ...], sigma: float) -> np.ndarray:
    noise = rng.standard_normal(shape, dtype=np.float32)
    if sigma < 0.3:
        return noise
    blurred = cv2.GaussianBlur(noise, (0, 0), sigma)
    return blurred / max(float(blurred.std()), 1e-6)
