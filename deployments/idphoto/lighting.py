"""Gentle light and colour correction of the subject: only pixel values change, never geometry.

Phone portraits under room light carry a yellow or green cast and a bright side of the face. Two conservative steps:
gray-world white balance with gains clipped to ±``MAX_GAIN_CHANGE`` (a strongly coloured scene must not be turned
grey), then CLAHE on the L channel of LAB blended half-way with the original so skin keeps its texture.
"""

from __future__ import annotations

import cv2
import numpy as np

MAX_GAIN_CHANGE = 0.10
CLAHE_CLIP_LIMIT = 2.0
CLAHE_BLEND = 0.5


def correct_lighting(rgb: np.ndarray, subject_mask: np.ndarray | None = None) -> np.ndarray:
    """White-balance and even out ``rgb`` (uint8 RGB); statistics come from ``subject_mask`` pixels when given."""
    balanced = white_balance(rgb, subject_mask)
    return equalize_luminance(balanced)


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
