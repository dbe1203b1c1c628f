"""Light and colour correction of the subject: only pixel values change, never geometry.

Three modes (``lighting``):

- ``gentle`` (default): skin keeps its colour. Only a face that is clearly too dark or too bright is brought
  towards a normal exposure, by a tone curve on lightness alone (a and b of CIELAB untouched), at most
  ``MAX_GENTLE_LIFT`` CIELAB L; a normally exposed photo is returned unchanged. The former default (``full``)
  treated skin, the largest warm area of the subject, as a colour cast and greyed it: it moved the face by a mean
  CIELAB ΔE of 7.9-14.0 on the astronaut under neutral, warm, cool and mixed light and on the eval portraits
  (docs/BENCHMARKS.md), where about 2 is what a viewer notices side by side; people want to look as in their photo.
- ``full`` (opt-in): the former default, gray-world white balance with gains clipped to ±``MAX_GAIN_CHANGE`` and
  CLAHE on lightness blended half-way; for a strongly cast photo whose owner accepts colder skin.
- ``off``: the source's pixels.
"""

from __future__ import annotations

from typing import Literal

import cv2
import numpy as np

Lighting = Literal["off", "gentle", "full"]
LIGHTING_MODES: tuple[Lighting, ...] = ("off", "gentle", "full")
MAX_GAIN_CHANGE = 0.10
CLAHE_CLIP_LIMIT = 2.0
CLAHE_BLEND = 0.5
# Median face lightness (CIELAB L, 0-100) left alone; outside it the gentle curve moves it towards the band.
GENTLE_L_BAND = (42.0, 82.0)
MAX_GENTLE_LIFT = 10.0


def correct_lighting(
    rgb: np.ndarray,
    subject_mask: np.ndarray | None = None,
    mode: Lighting = "gentle",
    face_mask: np.ndarray | None = None,
) -> np.ndarray:
    """``rgb`` (uint8 RGB) corrected in ``mode``; statistics come from the subject (``full``) or the face
    (``gentle``; the subject when no face mask is given)."""
    if mode == "off":
        return rgb
    if mode == "full":
        return equalize_luminance(white_balance(rgb, subject_mask))
    return gentle_exposure(rgb, face_mask if face_mask is not None else subject_mask)


def gentle_exposure(rgb: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """A gamma curve on CIELAB lightness moving the median masked L into ``GENTLE_L_BAND`` (by at most
    ``MAX_GENTLE_LIFT``); ``rgb`` itself when it already lies inside."""
    lab = cv2.cvtColor(rgb.astype(np.float32) * (1.0 / 255.0), cv2.COLOR_RGB2LAB)
    lightness = lab[..., 0]
    pixels = lightness if mask is None or np.count_nonzero(mask) < 64 else lightness[mask.astype(bool)]
    median = float(np.median(pixels))
    low, high = GENTLE_L_BAND
    if low <= median <= high or median <= 1.0 or median >= 99.0:
        return rgb
    target = float(np.clip(low if median < low else high, median - MAX_GENTLE_LIFT, median + MAX_GENTLE_LIFT))
    gamma = np.log(target / 100.0) / np.log(median / 100.0)
    lab[..., 0] = 100.0 * np.power(np.clip(lightness, 0.0, 100.0) * 0.01, gamma)
    out = cv2.cvtColor(lab, cv2.COLOR_LAB2RGB)
    return np.clip(out * 255.0 + 0.5, 0, 255).astype(np.uint8)


def white_balance(rgb: np.ndarray, subject_mask: np.ndarray | None = None) -> np.ndarray:
    """Gray-world gains per channel, clipped to a safe band around 1."""
    mask = None if subject_mask is None else subject_mask.astype(np.uint8)
    if mask is not None and cv2.countNonZero(mask) < 64:
        return rgb
    means = np.array(cv2.mean(rgb, mask=mask)[:3]) + 1e-6
    gains = np.clip(means.mean() / means, 1.0 - MAX_GAIN_CHANGE, 1.0 + MAX_GAIN_CHANGE)
    lut = np.clip(np.arange(256)[:, None] * gains[None, :], 0, 255).astype(np.uint8)
    return cv2.LUT(rgb, lut.reshape(256, 1, 3))


def equalize_luminance(rgb: np.ndarray) -> np.ndarray:
    """CLAHE on lightness only (tile grid scaled to the image), blended with the original lightness."""
    lab = cv2.cvtColor(rgb, cv2.COLOR_RGB2LAB)
    tiles = max(2, min(8, min(rgb.shape[:2]) // 96))
    clahe = cv2.createCLAHE(clipLimit=CLAHE_CLIP_LIMIT, tileGridSize=(tiles, tiles))
    lightness = lab[..., 0]
    lab[..., 0] = cv2.addWeighted(clahe.apply(lightness), CLAHE_BLEND, lightness, 1.0 - CLAHE_BLEND, 0.0)
    return cv2.cvtColor(lab, cv2.COLOR_LAB2RGB)


def mean_delta_e(before_rgb: np.ndarray, after_rgb: np.ndarray, mask: np.ndarray) -> float | None:
    """Mean CIE76 ΔE between two uint8 RGB images over ``mask`` (None when the mask holds too few pixels)."""
    if np.count_nonzero(mask) < 16:
        return None
    before, after = (
        cv2.cvtColor(x.astype(np.float32) * (1.0 / 255.0), cv2.COLOR_RGB2LAB) for x in (before_rgb, after_rgb)
    )
    return float(np.linalg.norm((before - after)[mask.astype(bool)], axis=1).mean())
