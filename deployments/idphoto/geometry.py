"""Where the ID photo comes from in the original: roll correction, crown finding, scale and crop as ONE affine.

Everything is decided on points (landmarks, chin, a crown found on the 256 px matte) and expressed as a single
``original -> output`` affine, so a 12 MP photo is resampled once, straight to the small output size. The spec's
ranges for head height (crown to chin) and top margin (top edge to crown) leave freedom; we take the centre of each
range unless another choice inside the ranges avoids padding beyond the photo's edges.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from deployments.common.affine import apply_affine, compose_affine, eye_roll_deg, invert_affine
from deployments.faces.types import Face
from deployments.idphoto.matte import LowResMatte
from deployments.idphoto.specs import IdSpec

logger = logging.getLogger(__name__)

ROLL_THRESHOLD_DEG = 1.0
# Where the person runs into the source's edge inside the frame, the cut fades out over this share of the height.
SOURCE_EDGE_FADE = 0.03
MATTE_THRESHOLD = 0.5
# Eyes sit about half-way between crown and chin; used only when the matte misses the head.
CROWN_FALLBACK_EYE_TO_CHIN = 1.0
_RANGE_STEPS = (0.5, 0.35, 0.65, 0.2, 0.8)
# Candidate (head, top) positions inside the ranges, centre first, then by distance from the centre.
_CANDIDATE_STEPS = sorted(
    itertools.product(_RANGE_STEPS, _RANGE_STEPS), key=lambda s: abs(s[0] - 0.5) + abs(s[1] - 0.5)
)


@dataclass(frozen=True, eq=False)
class Framing:
    """The chosen crop: the affine, the key points in output pixels and what had to be compromised."""

    affine: np.ndarray
    size_wh: tuple[int, int]
    scale: float
    roll_in_deg: float
    rotated: bool
    eyes_out: np.ndarray
    chin_out: tuple[float, float]
    crown_out: tuple[float, float]
    crown_from_matte: bool
    crown_clipped: bool
    cut_sides: tuple[str, ...]
    head_ratio_target: float
    top_ratio_target: float
    padding: dict[str, float]

    @property
    def upsampled(self) -> bool:
        return self.scale > 1.0

    @property
    def head_cropped_in_source(self) -> bool:
        """The photo cuts the head: its crown lies above the top edge, or the hair runs into a side edge in view."""
        return self.crown_clipped or bool(self.cut_sides)


def group_face(faces: Sequence[Face]) -> Face:
    """One face standing for several side by side (a couple's photo): the eyes and nose are the people's mean
    points, so the frame is centred between them and levelled on their mean eye line; the box spans all of them, so
    the crown is searched above every head; the chin is the lowest."""
    if len(faces) == 1:
        return faces[0]
    landmarks = np.mean([np.asarray(face.landmarks, dtype=np.float32) for face in faces], axis=0)
    boxes = np.array([face.box for face in faces], dtype=np.float64)
    box = (float(boxes[:, 0].min()), float(boxes[:, 1].min()), float(boxes[:, 2].max()), float(boxes[:, 3].max()))
    chin_y = max(face.chin[1] for face in faces)
    chin_x = float(np.mean([face.chin[0] for face in faces]))
    return Face(
        box=box,
        score=min(face.score for face in faces),
        landmarks=landmarks,
        roll_deg=eye_roll_deg(landmarks[0], landmarks[1]),
        chin=(chin_x, float(chin_y)),
    )


def plan_framing(
    face: Face,
    low: LowResMatte,
    spec: IdSpec,
    *,
    align: bool = True,
    roll_threshold_deg: float = ROLL_THRESHOLD_DEG,
) -> Framing:
    """Choose the ``original -> output`` affine that puts the head inside ``spec``'s ranges."""
    height_src, width_src = low.source_shape
    eyes = np.asarray(face.landmarks[:2], dtype=np.float64)
    roll_deg = eye_roll_deg(eyes[0], eyes[1])
    rotated = align and abs(roll_deg) > roll_threshold_deg
    eye_mid = eyes.mean(axis=0)
    # Rotating by +roll (counter-clockwise on screen) levels an eye line whose right eye is lower.
    upright = cv2.getRotationMatrix2D((float(eye_mid[0]), float(eye_mid[1])), roll_deg if rotated else 0.0, 1.0)
    eyes_up = apply_affine(upright, eyes)
    chin_up = apply_affine(upright, np.array([face.chin], dtype=np.float64))[0]
    centre_x = float((eyes_up[:, 0].mean() + chin_up[0]) / 2.0)
    face_width = float(face.box[2] - face.box[0])
    crown_y, from_matte, clipped = find_crown_y(low, upright, centre_x, float(eyes_up[:, 1].mean()), face_width)
    crown_from_face = float(eyes_up[:, 1].mean() - CROWN_FALLBACK_EYE_TO_CHIN * (chin_up[1] - eyes_up[:, 1].mean()))
    if not from_matte:
        crown_y = crown_from_face
        logger.info("matte missed the head; crown estimated from face proportions")
    elif clipped:
        # The crown lies above the photo: the matte's top is the photo's edge, not the head's. Face proportions
        # place it better (never lower than the edge the hair already reaches).
        crown_y = min(crown_y, crown_from_face)
    head_src = max(1.0, float(chin_up[1] - crown_y))

    width_out, height_out = spec.width_px, spec.height_px
    best = None
    for head_step, top_step in _CANDIDATE_STEPS:
        head_ratio = _within(spec.head_height, head_step)
        top_ratio = _within(spec.top_margin, top_step)
        scale = head_ratio * height_out / head_src
        to_output = np.array(
            [[scale, 0.0, width_out / 2.0 - scale * centre_x], [0.0, scale, top_ratio * height_out - scale * crown_y]]
        )
        affine = compose_affine(to_output, upright)
        if clipped:
            affine = _below_source_top(affine, width_out)
        padding = padding_fractions(affine, (width_out, height_out), (width_src, height_src))
        cost = round(2.0 * padding["bottom"] + padding["top"] + padding["sides"], 4)
        if best is None or cost < best[0]:
            best = (cost, affine, head_ratio, top_ratio, padding)
        if cost == 0.0:
            break
    _, affine, head_ratio, top_ratio, padding = best
    scale = float(np.hypot(affine[0, 0], affine[0, 1]))
    crown_source = apply_affine(invert_affine(upright), np.array([[centre_x, crown_y]]))
    crown_out = (float(apply_affine(affine, crown_source)[0, 0]), float(apply_affine(affine, crown_source)[0, 1]))
    return Framing(
        affine=affine,
        size_wh=(width_out, height_out),
        scale=scale,
        roll_in_deg=roll_deg,
        rotated=rotated,
        eyes_out=apply_affine(affine, eyes),
        chin_out=tuple(float(v) for v in apply_affine(affine, np.array([face.chin], dtype=np.float64))[0]),
        crown_out=crown_out,
        crown_from_matte=from_matte,
        crown_clipped=clipped,
        cut_sides=visible_side_cuts(low, affine, (width_out, height_out), (crown_source[0, 1], float(face.chin[1]))),
        head_ratio_target=head_ratio,
        top_ratio_target=top_ratio,
        padding=padding,
    )


def _below_source_top(affine: np.ndarray, width_out: int) -> np.ndarray:
    """Shift the crop down just enough that its top edge lies inside the photo.

    When the hair runs into the photo's top edge, padding above it would end the hair in a straight line against
    the new background; starting the crop inside the photo lets the hair leave the frame as it does in the source.
    """
    inverse = invert_affine(affine)
    # Source y of output point (u, v) is inverse[1, 0] * u + inverse[1, 1] * v + inverse[1, 2]; find v for y = 0.
    shift = max(0.0, *(-(inverse[1, 0] * u + inverse[1, 2]) / inverse[1, 1] for u in (0.0, float(width_out))))
    return affine - np.array([[0.0, 0.0, 0.0], [0.0, 0.0, shift]])


def visible_side_cuts(
    low: LowResMatte, affine: np.ndarray, size_wh: tuple[int, int], head_rows: tuple[float, float]
) -> tuple[str, ...]:
    """Sides (``left``, ``right``) where the head (rows crown to chin of the source) runs into the photo's edge at
    a place the output shows: there the hair would end in a straight vertical line."""
    height_src, width_src = low.source_shape
    ys = np.linspace(max(0.0, head_rows[0]), min(height_src - 1.0, head_rows[1]), 24)
    cuts = []
    for side, x in (("left", 0.0), ("right", width_src - 1.0)):
        points = np.stack([np.full_like(ys, x), ys], axis=1)
        on_matte = apply_affine(low.affine, points).astype(np.float32)
        alpha = cv2.remap(
            low.alpha, on_matte[None, :, 0], on_matte[None, :, 1], cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE
        )[0]
        out = apply_affine(affine, points)
        shown = (out[:, 0] > 0.5) & (out[:, 0] < size_wh[0] - 0.5) & (out[:, 1] >= 0) & (out[:, 1] < size_wh[1])
        if np.any(shown & (alpha >= MATTE_THRESHOLD)):
            cuts.append(side)
    return tuple(cuts)


def find_crown_y(
    low: LowResMatte, upright: np.ndarray, centre_x: float, eye_y: float, face_width: float
) -> tuple[float, bool, bool]:
    """Top of the person matte above the face, in upright source coordinates.

    Scans seven columns across the middle of the face upwards from the eye line and keeps the highest 0.5 crossing
    (hair buns and parted hair are not centred). Returns ``(crown_y, found, clipped)``: ``found`` is False when the
    matte does not cover the eyes, ``clipped`` when the head runs into the photo's top edge.
    """
    height_src, width_src = low.source_shape
    step_src = 0.5 / float(low.affine[0, 0])
    ys = np.arange(eye_y, eye_y - 3.0 * max(face_width, 1.0) - step_src, -step_src)
    xs = centre_x + face_width * np.linspace(-0.3, 0.3, 7)
    grid_x, grid_y = np.meshgrid(xs, ys)
    source = apply_affine(invert_affine(upright), np.stack([grid_x.ravel(), grid_y.ravel()], axis=1))
    low_pts = apply_affine(low.affine, source).astype(np.float32)
    samples = cv2.remap(
        low.alpha,
        low_pts[:, 0].reshape(grid_x.shape),
        low_pts[:, 1].reshape(grid_x.shape),
        cv2.INTER_LINEAR,
        borderMode=cv2.BORDER_CONSTANT,
        borderValue=0.0,
    )
    inside = (
        (source[:, 0] >= 0) & (source[:, 0] <= width_src - 1) & (source[:, 1] >= 0) & (source[:, 1] <= height_src - 1)
    ).reshape(grid_x.shape)
    if samples[0].max() < MATTE_THRESHOLD:
        return eye_y, False, False
    best_y, clipped = math.inf, False
    for column in range(samples.shape[1]):
        if samples[0, column] < MATTE_THRESHOLD:
            continue
        below = np.nonzero((samples[:, column] < MATTE_THRESHOLD) | ~inside[:, column])[0]
        if below.size == 0:
            best_y = min(best_y, float(ys[-1]))
            continue
        k = int(below[0])
        if k == 0:
            continue
        if not inside[k, column]:
            clipped = True
            best_y = min(best_y, float(ys[k - 1]))
            continue
        # Linear interpolation of the 0.5 crossing between the last sample inside and the first outside.
        a_in, a_out = samples[k - 1, column], samples[k, column]
        t = (a_in - MATTE_THRESHOLD) / max(a_in - a_out, 1e-6)
        best_y = min(best_y, float(ys[k - 1] + t * (ys[k] - ys[k - 1])))
    return best_y, True, clipped


def padding_fractions(
    affine: np.ndarray, size_wh: tuple[int, int], source_wh: tuple[int, int], grid: int = 24
) -> dict[str, float]:
    """Share of the output taken from beyond the photo's edges: top band, bottom band, and the sides."""
    width_out, height_out = size_wh
    us, vs = np.meshgrid(np.linspace(0, width_out - 1, grid), np.linspace(0, height_out - 1, grid))
    source = apply_affine(invert_affine(affine), np.stack([us.ravel(), vs.ravel()], axis=1))
    outside = (
        (source[:, 0] < -0.5)
        | (source[:, 0] > source_wh[0] - 0.5)
        | (source[:, 1] < -0.5)
        | (source[:, 1] > source_wh[1] - 0.5)
    ).reshape(grid, grid)
    third = grid // 3
    return {
        "top": round(float(outside[:third].mean()) / 3.0, 4),
        "bottom": round(float(outside[-third:].mean()) / 3.0, 4),
        "sides": round(float(outside[third:-third].mean()) / 3.0, 4),
        "total": round(float(outside.mean()), 4),
    }


def source_coverage(
    affine: np.ndarray, source_hw: tuple[int, int], size_wh: tuple[int, int], feather_px: float
) -> np.ndarray | None:
    """How much of each output pixel the source covers (float32 in [0, 1]), or None when it covers all of them.

    Beyond the source's edges there is nothing of the person, so there the matte must be 0 whatever the warp's
    border rule stretched into it. Where the person runs into such an edge the cut is faded over ``feather_px``
    (the distance from the uncovered region, in output pixels) instead of ending in a straight line; the output's
    own borders are not faded.
    """
    width_out, height_out = size_wh
    height_src, width_src = source_hw
    inverse = invert_affine(affine)
    us = np.arange(width_out, dtype=np.float32)[None, :]
    vs = np.arange(height_out, dtype=np.float32)[:, None]
    xs = inverse[0, 0] * us + inverse[0, 1] * vs + inverse[0, 2]
    ys = inverse[1, 0] * us + inverse[1, 1] * vs + inverse[1, 2]
    inside = (xs >= -0.5) & (xs <= width_src - 0.5) & (ys >= -0.5) & (ys <= height_src - 0.5)
    if inside.all():
        return None
    distance = cv2.distanceTransform(inside.astype(np.uint8), cv2.DIST_L2, 5)
    return np.clip(distance / max(feather_px, 1.0), 0.0, 1.0).astype(np.float32)


def subject_alpha(low: LowResMatte, framing: Framing, guide_rgb: np.ndarray) -> tuple[np.ndarray, bool]:
    """The person's matte in the output (whose pixels are ``guide_rgb``), 0 beyond the source's edges and faded into
    them, and whether the body runs into such an edge below the chin (shoulders cut by the source)."""
    size_wh = framing.size_wh
    alpha = low.matte_at(framing.affine, size_wh, guide_rgb)
    coverage = source_coverage(framing.affine, low.source_shape, size_wh, SOURCE_EDGE_FADE * size_wh[1])
    if coverage is None:
        return alpha, False
    return alpha * coverage, person_cut_below(alpha, coverage, framing.chin_out[1])


def person_cut_below(alpha: np.ndarray, coverage: np.ndarray | None, from_row: float, min_px: int = 3) -> bool:
    """Does the person (``alpha`` before the coverage is applied) run into the source's edge below ``from_row``?
    That is a body cut by the photo: its shoulders end where the photo ends, not where the frame does."""
    if coverage is None:
        return False
    edge = (coverage > 0.0) & (coverage <= 0.25)
    edge[: int(max(0.0, from_row))] = False
    return int(np.count_nonzero(edge & (alpha >= 0.5))) >= min_px


def warp_to_output(rgb: np.ndarray, affine: np.ndarray, size_wh: tuple[int, int]) -> np.ndarray:
    """Resample ``rgb`` through ``affine`` to ``size_wh`` with a box pre-filter for strong reductions.

    Only the region the output draws from is reduced, by exact 2x halvings (a linear resize at exactly half size
    averages 2x2 blocks, OpenCV's fastest path), until the remaining scale is at least 0.5; one warp then lands on
    the output grid. A 12 MP frame is never processed whole and strong downscales do not alias.
    """
    height_src, width_src = rgb.shape[:2]
    scale = float(np.hypot(affine[0, 0], affine[0, 1]))
    halvings = int(math.floor(math.log2(1.0 / scale))) if scale < 0.5 else 0
    factor = 2**halvings
    if factor > 1:
        corners = np.array([[0, 0], [size_wh[0], 0], [0, size_wh[1]], [size_wh[0], size_wh[1]]], dtype=np.float64)
        source = apply_affine(invert_affine(affine), corners)
        x0 = max(0, int(math.floor(source[:, 0].min())) - factor)
        y0 = max(0, int(math.floor(source[:, 1].min())) - factor)
        x1 = min(width_src, int(math.ceil(source[:, 0].max())) + factor)
        y1 = min(height_src, int(math.ceil(source[:, 1].max())) + factor)
        x1 -= (x1 - x0) % factor
        y1 -= (y1 - y0) % factor
        if x1 - x0 >= factor and y1 - y0 >= factor:
            region = rgb[y0:y1, x0:x1]
            for _ in range(halvings):
                region = cv2.resize(
                    region, (region.shape[1] // 2, region.shape[0] // 2), interpolation=cv2.INTER_LINEAR
                )
            offset = (factor - 1) / 2.0
            reduced_to_source = np.array([[factor, 0.0, x0 + offset], [0.0, factor, y0 + offset]])
            return cv2.warpAffine(
                region,
                compose_affine(affine, reduced_to_source),
                size_wh,
                flags=cv2.INTER_LINEAR,
                borderMode=cv2.BORDER_REPLICATE,
            )
    flags = cv2.INTER_CUBIC if scale > 1.0 else cv2.INTER_LINEAR
    return cv2.warpAffine(rgb, affine, size_wh, flags=flags, borderMode=cv2.BORDER_REPLICATE)


def _within(bounds: tuple[float, float], fraction: float) -> float:
    return bounds[0] + (bounds[1] - bounds[0]) * fraction
