"""Touch-ups of the person, with HivisionIDPhotos' names, ranges and meanings, and the mirror image.

They run on the decontaminated foreground (float32 RGB in [0, 1]) after matting and before compositing, so the
background is never touched: where the matte is 0 the photo is exactly the requested colour. Each slider's 0 is
neutral and an all-neutral set returns its input object unchanged (bit-identical photo). Order as Hivision's
``beauty_face``: whitening, saturation, brightness and contrast, sharpening.

- ``whitening_strength`` 0..30: each 10 is one full pass of a lightening curve on every channel (midtones rise
  most, black and white stay); a remainder blends one partial pass. Hivision uses a LUT picture; this is our curve.
- ``brightness_strength`` -50..50: added to every channel (0..255 units, as Hivision).
- ``contrast_strength`` -100..100: every channel times ``1 + c / 100`` (Hivision's gain).
- ``saturation_strength`` -100..100: HSV saturation times ``1 + s / 100``.
- ``sharpen_strength`` 0..5: each pixel moves away from its 8 neighbours' mean by ``0.4 * s`` of the gap (Hivision's
  kernel at its blend weight, without the brightening its un-normalised kernel adds).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import cv2
import numpy as np

from deployments.idphoto.geometry import Framing
from deployments.idphoto.texts import Lang, say

WHITENING_PASS = 10.0
# The lightening curve log(1 + (b - 1) x) / log(b): 0 and 1 fixed, mid-grey 0.5 -> 0.61.
WHITENING_CURVE_BASE = 2.5
SHARPEN_PER_STEP = 0.4
_NEIGHBOUR_MEAN = np.array([[1, 1, 1], [1, 0, 1], [1, 1, 1]], dtype=np.float32) / 8.0


@dataclass(frozen=True)
class Touchups:
    """The five sliders (validated by ``IdPhotoParams``)."""

    whitening_strength: float = 0.0
    brightness_strength: float = 0.0
    contrast_strength: float = 0.0
    saturation_strength: float = 0.0
    sharpen_strength: float = 0.0

    @property
    def neutral(self) -> bool:
        return all(value == 0 for value in dataclasses.astuple(self))

    def active(self) -> dict[str, float]:
        """The sliders away from 0 (for the report's notes)."""
        return {name: value for name, value in dataclasses.asdict(self).items() if value != 0}


def look_notes(touchups: Touchups, *, flipped: bool, watermark_note: str | None, lang: Lang = "en") -> list[str]:
    """What the caller changed about the look, for the report's notes (in ``lang``)."""
    notes = []
    sliders = touchups.active()
    if sliders:
        notes.append(say(lang, "note_touched_up", sliders=", ".join(f"{k}={v:g}" for k, v in sliders.items())))
    if flipped:
        notes.append(say(lang, "note_mirrored"))
    if watermark_note is not None:
        notes.append(watermark_note)
    return notes


def touch_up(foreground: np.ndarray, touchups: Touchups) -> np.ndarray:
    """Apply ``touchups`` to a float32 RGB image in [0, 1]; neutral settings return ``foreground`` itself."""
    if touchups.neutral:
        return foreground
    image = foreground.astype(np.float32, copy=True)
    if touchups.whitening_strength > 0:
        image = whiten(image, touchups.whitening_strength)
    if touchups.saturation_strength != 0:
        image = saturate(image, touchups.saturation_strength)
    if touchups.brightness_strength != 0 or touchups.contrast_strength != 0:
        gain = 1.0 + touchups.contrast_strength / 100.0
        image = image * gain + touchups.brightness_strength / 255.0
    if touchups.sharpen_strength > 0:
        image = sharpen(image, touchups.sharpen_strength)
    return np.clip(image, 0.0, 1.0)


def whiten(image: np.ndarray, strength: float) -> np.ndarray:
    """Full lightening passes for each whole 10 of ``strength``, then the remainder as a blend of one more pass."""
    full_passes, remainder = divmod(float(strength), WHITENING_PASS)
    for _ in range(int(full_passes)):
        image = _lighten(image)
    if remainder > 0:
        weight = remainder / WHITENING_PASS
        image = image + (_lighten(image) - image) * weight
    return image


def _lighten(image: np.ndarray) -> np.ndarray:
    base = WHITENING_CURVE_BASE
    return np.log1p(np.clip(image, 0.0, 1.0) * (base - 1.0)) / np.float32(np.log(base))


def saturate(image: np.ndarray, strength: float) -> np.ndarray:
    """HSV saturation scaled by ``1 + strength / 100`` (hue and value kept)."""
    hsv = cv2.cvtColor(np.clip(image, 0.0, 1.0), cv2.COLOR_RGB2HSV)
    hsv[..., 1] = np.clip(hsv[..., 1] * (1.0 + strength / 100.0), 0.0, 1.0)
    return cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)


def sharpen(image: np.ndarray, strength: float) -> np.ndarray:
    """Laplacian sharpening: each pixel moves away from its 8 neighbours' mean by ``0.4 * strength`` of the gap."""
    neighbours = cv2.filter2D(image, -1, _NEIGHBOUR_MEAN, borderType=cv2.BORDER_REFLECT)
    return image + (image - neighbours) * (SHARPEN_PER_STEP * strength)


def mirror_framing(framing: Framing) -> Framing:
    """The same crop seen in a mirror: the affine flips x, the output key points follow (eyes stay in
    left-right order); ``cut_sides`` name the source's edges and stay.

    Warping through the mirrored affine makes the flipped photo directly, so the matte, the compositing and the
    report all see the photo as delivered and a background picture is never mirrored.
    """
    width = framing.size_wh[0]
    flip = np.array([[-1.0, 0.0, width - 1.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    affine = (flip @ np.vstack([framing.affine, [0.0, 0.0, 1.0]]))[:2]
    eyes = np.asarray(framing.eyes_out, dtype=np.float64).copy()
    eyes[:, 0] = width - 1.0 - eyes[:, 0]
    return dataclasses.replace(
        framing,
        affine=affine,
        eyes_out=eyes[::-1].copy(),
        chin_out=(width - 1.0 - framing.chin_out[0], framing.chin_out[1]),
        crown_out=(width - 1.0 - framing.crown_out[0], framing.crown_out[1]),
    )
