"""The official DCT-Net service's geometry, as plain functions (image contract: HxWx3 uint8 RGB).

Whole image: shrink so the short side is at most 720 (``INTER_AREA``, never enlarged) and, beyond the official
service, the long side at most 2048 (a 720x69000 strip would otherwise take ~25 GB of activations), pad bottom/right
with white to multiples of 16 (both limits are multiples of 16, so the padded image stays within
``admission.DCTNET_INPUT``), stylize, crop the padding away. Heads: 288 crops aligned with the ``dctnet-288``
template (white outside the photo), stylized, warped back through an elliptical soft mask, blended one after
another; the result is resized to the input size. (The official pipeline pads a side that is already a multiple of 16
by 16 more pixels when the other is not; we pad each side only as needed. The padding is cropped away either way.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from deployments.common.admission import DCTNET_LONG_SIDE_PX, DCTNET_SHORT_SIDE_PX
from deployments.common.affine import compose_affine, invert_affine, pixel_scale_affine
from deployments.faces.paste import paste_back

SIZE_MULTIPLE_PX = 16
HEAD_SIZE_PX = 288
PAD_VALUE = 255


@dataclass(frozen=True, eq=False)
class PreparedImage:
    """The padded model input, the resized size inside it, and the original size."""

    padded: np.ndarray
    size_wh: tuple[int, int]
    original_wh: tuple[int, int]

    def original_to_resized(self) -> np.ndarray:
        """2x3 map of original pixel indices to resized ones."""
        return pixel_scale_affine(self.size_wh[0] / self.original_wh[0], self.size_wh[1] / self.original_wh[1])


def prepare_background(rgb: np.ndarray) -> PreparedImage:
    height, width = rgb.shape[:2]
    scale = min(1.0, DCTNET_SHORT_SIDE_PX / min(height, width), DCTNET_LONG_SIDE_PX / max(height, width))
    if scale < 1.0:
        size_wh = (max(1, int(round(width * scale))), max(1, int(round(height * scale))))
        resized = cv2.resize(rgb, size_wh, interpolation=cv2.INTER_AREA)
    else:
        size_wh, resized = (width, height), rgb
    pad_h = -size_wh[1] % SIZE_MULTIPLE_PX
    pad_w = -size_wh[0] % SIZE_MULTIPLE_PX
    padded = cv2.copyMakeBorder(resized, 0, pad_h, 0, pad_w, cv2.BORDER_CONSTANT, value=(PAD_VALUE,) * 3)
    return PreparedImage(padded=np.ascontiguousarray(padded), size_wh=size_wh, original_wh=(width, height))


def head_mask(size_px: int = HEAD_SIZE_PX) -> np.ndarray:
    """Soft elliptical head mask (float32, 1 inside): an ellipse of half-axes 0.4·w × 0.49·h, whose distance
    transform is normalised by 0.15·size and clipped to 1, as DCT-Net's generated face mask."""
    canvas = np.zeros((size_px, size_px), np.uint8)
    centre = (size_px // 2, size_px // 2)
    axes = (int(0.4 * size_px), int(0.49 * size_px))
    cv2.ellipse(canvas, centre, axes, 0, 0, 360, 255, thickness=-1)
    distance = cv2.distanceTransform(canvas, cv2.DIST_L2, 5)
    return np.clip(distance / (0.15 * size_px), 0.0, 1.0).astype(np.float32)


def compose_cartoon(
    stylized_background: np.ndarray,
    prepared: PreparedImage,
    heads: list[tuple[np.ndarray, np.ndarray]],
    opacities: Sequence[float] | None = None,
) -> np.ndarray:
    """Crop the background result, blend each (stylized head, original-image→crop matrix), resize to the input
    (``opacities``: one per head, for faces fading in or out of a video)."""
    width, height = prepared.size_wh
    canvas = np.ascontiguousarray(stylized_background[:height, :width])
    if heads:
        resized_to_original = invert_affine(prepared.original_to_resized())
        on_canvas = [(head, compose_affine(matrix, resized_to_original)) for head, matrix in heads]
        canvas = paste_back(canvas, on_canvas, mask=head_mask(heads[0][0].shape[0]), opacities=opacities)
    if (width, height) == prepared.original_wh:
        return canvas
    enlarge = prepared.original_wh[0] > width
    return cv2.resize(canvas, prepared.original_wh, interpolation=cv2.INTER_CUBIC if enlarge else cv2.INTER_AREA)
