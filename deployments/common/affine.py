"""2x3 affine maps between pixel-index frames, the one convention every image job shares.

Points are pixel-index coordinates (pixel centres at integers, the ``cv2.warpAffine`` convention), so a map made
here can go straight to ``cv2.warpAffine`` and its inverse maps a result back exactly. Matrices are ``(2, 3)``
float64 ``[[a, b, tx], [c, d, ty]]``: ``x' = a·x + b·y + tx``.
"""

from __future__ import annotations

import math

import cv2
import numpy as np

_LAST_ROW = np.array([[0.0, 0.0, 1.0]])


def invert_affine(affine: np.ndarray) -> np.ndarray:
    """The map back: ``apply_affine(invert_affine(m), apply_affine(m, p)) == p``."""
    return cv2.invertAffineTransform(np.asarray(affine, dtype=np.float64))


def compose_affine(outer: np.ndarray, inner: np.ndarray) -> np.ndarray:
    """``outer ∘ inner``: one map that applies ``inner`` first, then ``outer``."""
    return (np.vstack([outer, _LAST_ROW]) @ np.vstack([inner, _LAST_ROW]))[:2]


def apply_affine(affine: np.ndarray, points: np.ndarray) -> np.ndarray:
    """``(N, 2)`` points through ``affine`` (float64 unless both are float32)."""
    return points @ affine[:, :2].T + affine[:, 2]


def pixel_scale_affine(
    scale_x: float, scale_y: float | None = None, *, shift_xy: tuple[float, float] = (0.0, 0.0)
) -> np.ndarray:
    """Pixel indices of an image to those of the same image resized by ``scale`` (then moved by ``shift_xy``).

    Resizing scales pixel edges, not centres: ``x' + 0.5 = s·(x + 0.5) + shift``, so ``x' = s·x + shift + 0.5·s − 0.5``
    (what ``cv2.resize`` does). A plain ``s·x`` would drift by half a pixel of each size.
    """
    scale_y = scale_x if scale_y is None else scale_y
    return np.array(
        [
            [scale_x, 0.0, shift_xy[0] + 0.5 * scale_x - 0.5],
            [0.0, scale_y, shift_xy[1] + 0.5 * scale_y - 0.5],
        ],
        dtype=np.float64,
    )


def eye_roll_deg(left_eye: np.ndarray, right_eye: np.ndarray) -> float:
    """Eye-line angle in degrees, positive when the image-right eye is lower (a clockwise tilt on screen): the
    ``Face.roll_deg`` convention, and the angle ``cv2.getRotationMatrix2D`` takes to level the line."""
    return math.degrees(math.atan2(float(right_eye[1] - left_eye[1]), float(right_eye[0] - left_eye[0])))
