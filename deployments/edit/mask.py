"""The face region of an edit: a feathered mask (HxW float32 in [0, 1]) over each face, from the face mesh's outline
where the mesh ran, else an ellipse around the detector's box turned by the face's roll. Exactly 0 outside the
feather (so a face-scoped look leaves those pixels bit-identical), exactly 1 in its core."""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from deployments.faces.types import Face

FEATHER_OF_FACE = 0.06  # the feather's sigma, as a fraction of the face box's longer side
CORE = 0.999  # a mask value above this is the core: exactly 1


def face_mask(shape: tuple[int, int], faces: Sequence[Face]) -> np.ndarray:
    """The feathered union of every face's region on a photo of ``shape`` (height, width)."""
    mask = np.zeros(shape, np.float32)
    for face in faces:
        mask = np.maximum(mask, _one_face(shape, face))
    mask[mask > CORE] = 1.0
    return mask


def _one_face(shape: tuple[int, int], face: Face) -> np.ndarray:
    x0, y0, x1, y1 = face.box
    side = max(x1 - x0, y1 - y0)
    sigma = max(FEATHER_OF_FACE * side, 1.0)
    hard = np.zeros(shape, np.uint8)
    if face.mesh is not None:
        hull = cv2.convexHull(np.asarray(face.mesh, np.float32)).astype(np.int32)
        cv2.fillConvexPoly(hard, hull, 1)
    else:
        centre = (int(round((x0 + x1) / 2)), int(round((y0 + y1) / 2 - 0.05 * (y1 - y0))))
        axes = (int(round(0.55 * (x1 - x0))), int(round(0.65 * (y1 - y0))))
        cv2.ellipse(hard, centre, axes, float(face.roll_deg), 0, 360, 1, thickness=-1)
    # Blur only a window around the face: the kernel's support ends there, so the mask is exactly 0 beyond it.
    pad = int(np.ceil(4 * sigma)) + 1
    ys, xs = np.nonzero(hard)
    if not len(ys):
        return hard.astype(np.float32)
    top, bottom = max(ys.min() - pad, 0), min(ys.max() + pad + 1, shape[0])
    left, right = max(xs.min() - pad, 0), min(xs.max() + pad + 1, shape[1])
    mask = np.zeros(shape, np.float32)
    window = hard[top:bottom, left:right].astype(np.float32)
    # Erode by the feather's reach first, so the feather falls inside the outline rather than spilling past it.
    size = 2 * int(round(sigma)) + 1
    window = cv2.erode(window, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (size, size)))
    mask[top:bottom, left:right] = cv2.GaussianBlur(window, (0, 0), sigma, borderType=cv2.BORDER_CONSTANT)
    return mask
