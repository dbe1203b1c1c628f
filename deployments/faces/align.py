"""Face alignment to named 5-point templates (similarity transform, no reflection).

Each template is fitted the way its network's official inference fits it: GPEN and DCT-Net by least squares over all
five points, facexlib and CodeFormer (the ffhq-512 crops of GFPGAN and CodeFormer) by OpenCV's robust
``estimateAffinePartial2D(..., method=cv2.LMEDS)``, which drops points off the consensus (a mouth corner the
landmarker misplaced) and so moves the crop by up to a few pixels where least squares would not.

Templates are in crop pixel-index coordinates, in ``Face.landmarks`` order (image-left eye, image-right eye, nose tip,
image-left mouth corner, image-right mouth corner); the matrices returned map original-image pixel indices to crop
pixel indices, the ``cv2.warpAffine`` convention, so ``paste.paste_back`` can invert them exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import cv2
import numpy as np

from deployments.common.affine import compose_affine, pixel_scale_affine
from deployments.common.errors import InvalidParameter

# The 96x112 five-point reference of the ArcFace/SphereFace crops, used by GPEN and DCT-Net.
REFERENCE_96X112 = np.array(
    [
        [30.29459953, 51.69630051],
        [65.53179932, 51.50139999],
        [48.02519989, 71.73660278],
        [33.54930115, 92.3655014],
        [62.72990036, 92.20410156],
    ]
)
# facexlib's FFHQ template for 512 crops (GFPGAN, CodeFormer).
FFHQ_512 = np.array(
    [
        [192.98138, 239.94708],
        [318.90277, 240.1936],
        [256.63416, 314.01935],
        [201.26117, 371.41043],
        [313.08905, 371.15118],
    ]
)


@dataclass(frozen=True, eq=False)
class AlignTemplate:
    """A named crop: its size and where the five points land; ``border_rgb`` fills outside the image; ``robust_fit``
    fits the points with LMedS as facexlib does, else by least squares."""

    name: str
    size_px: int
    points: np.ndarray
    border_rgb: tuple[int, int, int] = (0, 0, 0)
    robust_fit: bool = False

    def fit(self, landmarks: np.ndarray) -> np.ndarray:
        """The 2x3 image->crop matrix for ``landmarks`` ``(5, 2)``, fitted as this template's official code does."""
        if self.robust_fit:
            return estimate_similarity_lmeds(landmarks, self.points)
        return estimate_similarity(np.reshape(landmarks, (-1, 2)), self.points)


@dataclass(frozen=True, eq=False)
class AlignedFace:
    """A template crop (HxWx3 uint8 RGB) and the 2x3 image->crop matrix that made it."""

    crop: np.ndarray
    matrix: np.ndarray


def gpen_points(size_px: int, inner_padding: float = 0.25) -> np.ndarray:
    """GPEN's template: the 96x112 reference made square (x shifted by 8), padded inside by ``inner_padding`` of
    the side on each edge, scaled to ``size_px`` (at 512 the eyes land near (202, 243) and (309, 242))."""
    square = REFERENCE_96X112 + np.array([8.0, 0.0])
    padded_side = 112.0 * (1.0 + 2.0 * inner_padding)
    return (square + 112.0 * inner_padding) * (size_px / padded_side)


def dctnet_points(size_px: int = 288, ratio: float = 0.75) -> np.ndarray:
    """DCT-Net's head crop (official ``cartoonize.py``: ``warp_and_crop_face(ratio=0.75, crop_size=288)`` with the
    square reference): the 96x112 points shifted by (1, 1), made square, shrunk by ``ratio`` about the centre of the
    112 square, then scaled to ``size_px``: a loose head-and-hair crop."""
    square = REFERENCE_96X112 + np.array([1.0 + 8.0, 1.0])
    return ((square - 56.0) * ratio + 56.0) * (size_px / 112.0)


TEMPLATES: dict[str, AlignTemplate] = {
    t.name: t
    for t in (
        AlignTemplate("gpen-256", 256, gpen_points(256)),
        AlignTemplate("gpen-512", 512, gpen_points(512)),
        AlignTemplate("gpen-1024", 1024, gpen_points(1024)),
        AlignTemplate("ffhq-512", 512, FFHQ_512.copy(), border_rgb=(132, 133, 135), robust_fit=True),
        # The official pipeline fills outside the photo with white.
        AlignTemplate("dctnet-288", 288, dctnet_points(288), border_rgb=(255, 255, 255)),
    )
}
for _template in TEMPLATES.values():
    _template.points.setflags(write=False)


def get_template(name: str) -> AlignTemplate:
    try:
        return TEMPLATES[name]
    except KeyError:
        raise InvalidParameter(f"unknown alignment template {name!r}", details={"known": sorted(TEMPLATES)}) from None


def estimate_similarity(src_pts: np.ndarray, dst_pts: np.ndarray) -> np.ndarray:
    """Least-squares similarity (rotation, uniform scale, translation; never a reflection) mapping ``src_pts`` onto
    ``dst_pts`` (Umeyama 1991). Returns a 2x3 float64 matrix."""
    src = np.asarray(src_pts, dtype=np.float64)
    dst = np.asarray(dst_pts, dtype=np.float64)
    if src.ndim != 2 or src.shape[1] != 2 or src.shape != dst.shape or len(src) < 2:
        raise InvalidParameter(f"need two matching (N>=2, 2) point sets, got {src.shape} and {dst.shape}")
    src_mean, dst_mean = src.mean(axis=0), dst.mean(axis=0)
    src_c, dst_c = src - src_mean, dst - dst_mean
    covariance = dst_c.T @ src_c / len(src)
    u, singular, vt = np.linalg.svd(covariance)
    sign = np.eye(2)
    if np.linalg.det(u) * np.linalg.det(vt) < 0:
        sign[1, 1] = -1.0
    rotation = u @ sign @ vt
    src_var = (src_c**2).sum() / len(src)
    if src_var < 1e-12:
        raise InvalidParameter("source points coincide: no similarity transform")
    scale = float(np.trace(np.diag(singular) @ sign)) / src_var
    matrix = np.empty((2, 3))
    matrix[:, :2] = scale * rotation
    matrix[:, 2] = dst_mean - matrix[:, :2] @ src_mean
    return matrix


def estimate_similarity_lmeds(src_pts: np.ndarray, dst_pts: np.ndarray) -> np.ndarray:
    """facexlib's and CodeFormer's fit, call for call: ``cv2.estimateAffinePartial2D(float32 landmarks, template,
    method=cv2.LMEDS)`` (OpenCV's LMedS draws from a fixed seed: deterministic). Returns a 2x3 float64 matrix."""
    src = np.asarray(src_pts, dtype=np.float32).reshape(-1, 2)
    dst = np.asarray(dst_pts)
    if len(src) < 2 or src.shape != dst.shape:
        raise InvalidParameter(f"need two matching (N>=2, 2) point sets, got {src.shape} and {dst.shape}")
    matrix, _ = cv2.estimateAffinePartial2D(src, dst, method=cv2.LMEDS)
    if matrix is None:
        raise InvalidParameter("landmarks admit no similarity transform (degenerate points)")
    return matrix


def align_face(image_rgb: np.ndarray, landmarks: np.ndarray, template: AlignTemplate | str) -> AlignedFace:
    """Warp one face to ``template`` (a registry name or an ``AlignTemplate``)."""
    if isinstance(template, str):
        template = get_template(template)
    matrix = template.fit(landmarks)
    crop = cv2.warpAffine(
        image_rgb,
        matrix,
        (template.size_px, template.size_px),
        flags=cv2.INTER_LINEAR,
        borderMode=cv2.BORDER_CONSTANT,
        borderValue=template.border_rgb,
    )
    return AlignedFace(crop=crop, matrix=matrix)


def rescale_crop_matrix(matrix: np.ndarray, from_px: int, to_px: int) -> np.ndarray:
    """The image->crop matrix for the same crop resampled from ``from_px`` to ``to_px`` pixels a side.

    Models may return a face at another size than it was aligned at (GPEN-256 fed a 512 crop, a test's tiny model);
    pixel centres correspond (:func:`pixel_scale_affine`).
    """
    return compose_affine(pixel_scale_affine(to_px / from_px), np.asarray(matrix, dtype=np.float64))


class HasLandmarks(Protocol):
    """A face as alignment needs it: a photo's ``Face`` or a video's ``TrackedFace`` (smoothed landmarks)."""

    landmarks: np.ndarray


def align_all(image_rgb: np.ndarray, faces: Sequence[HasLandmarks], template: AlignTemplate | str) -> list[AlignedFace]:
    """Every face of one photo aligned to ``template``, in order."""
    return [align_face(image_rgb, face.landmarks, template) for face in faces]
