"""The ID photo one step at a time, for front-ends that preview colours without matting again: matte a whole photo
(a transparent cut-out), take a cut-out's alpha as the matte of a later crop, put a background behind a cut-out, fit
a finished photo to a size. The full pipeline (``pipeline.make_id_photo``) chains the same pieces in one call."""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from deployments.common.image import require_image
from deployments.idphoto.background import Render, composite, render_background
from deployments.idphoto.matte import LowResMatte, estimate_foreground

IDENTITY_AFFINE = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], dtype=np.float64)


@dataclass(frozen=True, eq=False)
class CutOut:
    """A person on nothing: decontaminated RGB (HxWx3 uint8) and its alpha (HxW uint8)."""

    rgb: np.ndarray
    alpha: np.ndarray


def cut_out(rgb: np.ndarray, low: LowResMatte) -> CutOut:
    """The whole photo with the matte as its alpha, the colours of the background bled out of the hair edges."""
    require_image(rgb)
    height, width = rgb.shape[:2]
    alpha = low.matte_at(IDENTITY_AFFINE, (width, height), rgb)
    foreground = estimate_foreground(rgb, alpha)
    return CutOut(rgb=_to_uint8(foreground), alpha=_to_uint8(alpha))


def matte_of_cut_out(alpha: np.ndarray) -> LowResMatte:
    """A cut-out's own alpha as the matte a crop frames by (already at full size: it is only resampled)."""
    return LowResMatte(
        alpha=alpha.astype(np.float32) / 255.0,
        affine=IDENTITY_AFFINE,
        source_shape=(int(alpha.shape[0]), int(alpha.shape[1])),
        matting="modnet",
    )


def on_white(rgb: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """A cut-out over white: what a face detector sees of it (the hidden pixels of a PNG may be anything)."""
    return put_background(rgb, alpha, (255, 255, 255), "solid")


def put_background(rgb: np.ndarray, alpha: np.ndarray, colour_rgb: tuple[int, int, int], render: Render) -> np.ndarray:
    """The cut-out over a ``render`` background of ``colour_rgb``; the subject's pixels are kept as they are."""
    require_image(rgb)
    height, width = rgb.shape[:2]
    background = render_background(colour_rgb, (width, height), render)
    return composite(rgb.astype(np.float32) / 255.0, alpha.astype(np.float32) / 255.0, background)


def fit_to(image: np.ndarray, size_wh: tuple[int, int]) -> np.ndarray:
    """``image`` resampled to ``size_wh`` (area-averaged when shrinking), unchanged when it is that size already."""
    if (image.shape[1], image.shape[0]) == tuple(size_wh):
        return image
    shrinking = size_wh[0] < image.shape[1]
    return cv2.resize(image, size_wh, interpolation=cv2.INTER_AREA if shrinking else cv2.INTER_CUBIC)


def _to_uint8(values: np.ndarray) -> np.ndarray:
    return np.clip(values * 255.0 + 0.5, 0, 255).astype(np.uint8)
