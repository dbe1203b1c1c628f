"""Paste processed face crops back into the full image (optionally an upscaled copy of it).

Each crop travels with the 2x3 image->crop matrix from ``align.align_face`` (original-image pixel indices). Only the
bounding box of each face's footprint is warped, never the whole frame, so cost follows face size, not photo size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import cv2
import numpy as np

from deployments.common.affine import apply_affine, compose_affine, invert_affine, pixel_scale_affine
from deployments.common.errors import InvalidParameter
from deployments.common.image import require_image

DEFAULT_FEATHER_FRAC = 0.06  # of the crop side: wide enough to hide the seam, narrow enough to keep the face
ALLOWED_UPSCALES = (1, 2, 4)


def feather_mask(size_px: int, feather_px: float) -> np.ndarray:
    """Crop-sized float32 mask: 1 inside, a smooth (smoothstep) ramp to 0 over ``feather_px`` at every edge."""
    distance = np.minimum(np.arange(size_px), np.arange(size_px)[::-1]).astype(np.float32) + 0.5
    ramp = np.clip(distance / max(feather_px, 1e-3), 0.0, 1.0)
    ramp = ramp * ramp * (3.0 - 2.0 * ramp)
    return np.minimum(ramp[:, None], ramp[None, :])


def _crop_to_output(matrix: np.ndarray, upscale: int) -> np.ndarray:
    """Invert image->crop and compose with original->upscaled pixel indices."""
    return compose_affine(pixel_scale_affine(upscale), invert_affine(matrix))


def paste_back(
    image_rgb: np.ndarray,
    crops_with_matrices: Sequence[tuple[np.ndarray, np.ndarray]],
    *,
    blend: float = 1.0,
    upscale: int = 1,
    feather_px: float | None = None,
    mask: np.ndarray | None = None,
    opacities: Sequence[float] | None = None,
) -> np.ndarray:
    """Return a copy of ``image_rgb`` with every crop blended in through its feathered footprint.

    ``image_rgb`` is the base at output resolution (the caller upscales it ×``upscale``); matrices still refer to the
    ORIGINAL image. Faces are composited in order, so overlapping faces each keep their soft edge over the result
    so far. ``blend`` 0..1 mixes processed over original; ``feather_px`` is in crop pixels (default 6 % of the side).
    ``mask`` (crop-sized float32 in [0, 1]) replaces the feathered square, e.g. DCT-Net's elliptical head mask.
    ``opacities`` (one per crop, 0..1) scale ``blend`` per face: a face fading in or out of a video.
    """
    if not 0.0 <= blend <= 1.0:
        raise InvalidParameter(f"blend must be within 0..1, got {blend}")
    if upscale not in ALLOWED_UPSCALES:
        raise InvalidParameter(f"upscale must be one of {ALLOWED_UPSCALES}, got {upscale}")
    require_image(image_rgb, what="paste-back base image")
    if mask is not None and (mask.ndim != 2 or mask.shape[0] != mask.shape[1]):
        raise InvalidParameter(f"mask must be a square HxW float array, got {mask.shape}")
    result = image_rgb.copy()
    if blend == 0.0:
        return result
    height, width = result.shape[:2]
    if opacities is not None and len(opacities) != len(crops_with_matrices):
        raise InvalidParameter(f"{len(opacities)} opacities for {len(crops_with_matrices)} crops")
    for index, (crop, matrix) in enumerate(crops_with_matrices):
        require_image(crop, what="pasted crop")
        if crop.shape[0] != crop.shape[1]:
            raise InvalidParameter(f"pasted crops must be square, got {crop.shape[1]}x{crop.shape[0]}")
        crop_mask = _crop_mask(crop.shape[0], feather_px, mask)
        opacity = 1.0 if opacities is None else float(np.clip(opacities[index], 0.0, 1.0))
        _paste_one(result, crop, crop_mask, _crop_to_output(matrix, upscale), blend * opacity, width, height)
    return result


def _crop_mask(side_px: int, feather_px: float | None, mask: np.ndarray | None) -> np.ndarray:
    if mask is None:
        return feather_mask(side_px, feather_px if feather_px is not None else DEFAULT_FEATHER_FRAC * side_px)
    if mask.shape[0] == side_px:
        return mask.astype(np.float32, copy=False)
    return cv2.resize(mask.astype(np.float32), (side_px, side_px), interpolation=cv2.INTER_AREA)


def _paste_one(
    result: np.ndarray,
    crop: np.ndarray,
    crop_mask: np.ndarray,
    crop_to_out: np.ndarray,
    blend: float,
    width: int,
    height: int,
) -> None:
    side_px = crop.shape[0]
    corners = np.array([[-0.5, -0.5], [side_px - 0.5, -0.5], [-0.5, side_px - 0.5], [side_px - 0.5, side_px - 0.5]])
    footprint = apply_affine(crop_to_out, corners)
    x0 = max(0, math.floor(footprint[:, 0].min()) - 1)
    y0 = max(0, math.floor(footprint[:, 1].min()) - 1)
    x1 = min(width, math.ceil(footprint[:, 0].max()) + 2)
    y1 = min(height, math.ceil(footprint[:, 1].max()) + 2)
    if x1 <= x0 or y1 <= y0:
        return
    local = crop_to_out.copy()
    local[:, 2] -= (x0, y0)
    size = (x1 - x0, y1 - y0)
    face = cv2.warpAffine(crop, local, size, flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    footprint_mask = cv2.warpAffine(crop_mask, local, size, flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT)
    alpha = (footprint_mask * blend)[:, :, None]
    region = result[y0:y1, x0:x1].astype(np.float32)
    region += alpha * (face.astype(np.float32) - region)
    result[y0:y1, x0:x1] = np.clip(np.rint(region), 0, 255).astype(np.uint8)
