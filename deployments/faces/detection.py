"""What the face detectors here share: a hit (:class:`Detection`), the knobs of one run (:class:`DetectionParams`), a
copy of the photo the small-face pass searched (:class:`View`), and box overlap with (weighted) non-maximum
suppression. BlazeFace (``detect``), MTCNN (``mtcnn``) and the small-face judge (``confirm``) all build on this module
and on none of each other's, so ``detect`` can load the other two (and torch) only when MTCNN's weights are given.

Coordinates are original-image pixel-index coordinates (pixel centres at integers), as ``detect`` explains.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from deployments.common.errors import InvalidParameter

# BlazeFace box width per eye distance (astronaut and LFW crops: eye distance ≈ 0.43–0.48 of the box).
EYE_DISTANCE_PER_BOX = 0.45


@dataclass(frozen=True, eq=False)
class Detection:
    """One detector hit: ``box`` (x0, y0, x1, y1), ``keypoints`` ``(4, 2)``: image-left eye, image-right eye, nose
    tip, mouth centre (the points both BlazeFace and MTCNN give; BlazeFace's ear points are not kept)."""

    box: np.ndarray
    score: float
    keypoints: np.ndarray

    @property
    def size_px(self) -> float:
        return float(max(self.box[2] - self.box[0], self.box[3] - self.box[1]))


@dataclass(frozen=True, eq=False)
class View:
    """One copy of the photo the small-face pass searched: its pixels and BlazeFace's own hits on it."""

    image_rgb: np.ndarray
    tile_hits: list[Detection]


@dataclass(frozen=True)
class DetectionParams:
    """Knobs of one detection run (``FaceAnalysisConfig`` extends this, so each knob is declared once).

    ``score_threshold``: detector score a face needs; ``small_face_threshold``: the probability
    :mod:`deployments.faces.confirm` must give a face of at most ``small_face_max_px`` (box side) found by the
    small-face pass of a large photo that is not a portrait (grey faces of old group photos score far below the
    detectors' usual bars, so their candidates are confirmed by agreement and by their row instead; at 0.94, 0.013
    false hits per cluttered photo of ``bench/bench_group_faces.py`` on its tuning seeds, the row's weights fitted on
    three quarters and tested on the fourth). ``min_eye_px``: smallest eye distance the tiles are planned for;
    ``max_windows``: cap on tiled detector runs per photo, which raises that minimum on very large photos instead of
    letting cost explode;
    ``portrait_face_frac``: when the first 128 px pass finds exactly one face and it is this large (box side / long
    image side), the photo is a portrait and the search ends there (a few ms); ``None`` always tiles.
    """

    score_threshold: float = 0.7
    small_face_threshold: float = 0.94
    small_face_max_px: float = 100.0
    small_face_min_image_px: int = 1200
    nms_iou: float = 0.3
    min_eye_px: float = 10.0
    max_windows: int = 1024
    portrait_face_frac: float | None = 0.15

    def __post_init__(self) -> None:
        # a detector's score and the small-face judge's probability: two scales, each bar set on its own
        if not (0.0 < self.score_threshold < 1.0 and 0.0 < self.small_face_threshold < 1.0):
            raise InvalidParameter("score_threshold and small_face_threshold must each lie in (0, 1)")
        if not 0.0 < self.nms_iou < 1.0:
            raise InvalidParameter(f"nms_iou must be in (0, 1), got {self.nms_iou}")
        if self.min_eye_px <= 0 or min(self.max_windows, self.small_face_max_px, self.small_face_min_image_px) < 0:
            raise InvalidParameter("min_eye_px must be positive; max_windows and the small_face_* sizes >= 0")

    def small_face_pass(self, width: int, height: int) -> bool:
        return self.small_face_max_px > 0 and max(width, height) >= self.small_face_min_image_px


def box_overlap(box: np.ndarray, boxes: np.ndarray, by: str = "union") -> np.ndarray:
    """Intersection over the union (IoU) or over the smaller of the two areas (``by="min"``)."""
    x0 = np.maximum(box[0], boxes[:, 0])
    y0 = np.maximum(box[1], boxes[:, 1])
    x1 = np.minimum(box[2], boxes[:, 2])
    y1 = np.minimum(box[3], boxes[:, 3])
    inter = np.clip(x1 - x0, 0, None) * np.clip(y1 - y0, 0, None)
    area = (box[2] - box[0]) * (box[3] - box[1])
    areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    denominator = np.minimum(area, areas) if by == "min" else area + areas - inter
    return inter / np.maximum(denominator, 1e-6)


def non_max_suppression(
    boxes: np.ndarray, scores: np.ndarray, threshold: float, *, overlap: str = "union"
) -> np.ndarray:
    """Indices of the boxes greedy NMS keeps, best first; ``overlap="min"`` also drops a box lying inside a kept one."""
    remaining = np.argsort(-scores, kind="stable")
    kept = []
    while remaining.size:
        best = remaining[0]
        kept.append(best)
        remaining = remaining[1:][box_overlap(boxes[best], boxes[remaining[1:]], overlap) <= threshold]
    return np.array(kept, dtype=np.int64)


def weighted_nms(detections: list[Detection], iou_threshold: float) -> list[Detection]:
    """MediaPipe's weighted NMS: each cluster around its best hit becomes the score-weighted mean of its members
    (steadier boxes and keypoints than plain NMS when windows and models see the same face)."""
    if not detections:
        return []
    order = sorted(detections, key=lambda d: d.score, reverse=True)
    boxes = np.stack([d.box for d in order])
    scores = np.array([d.score for d in order], dtype=np.float32)
    points = np.stack([d.keypoints for d in order])
    remaining = np.arange(len(order))
    merged: list[Detection] = []
    while remaining.size:
        best = remaining[0]
        overlap = box_overlap(boxes[best], boxes[remaining]) > iou_threshold
        members = remaining[overlap]
        weights = scores[members] / scores[members].sum()
        box = (boxes[members] * weights[:, None]).sum(axis=0)
        keypoints = (points[members] * weights[:, None, None]).sum(axis=0)
        merged.append(Detection(box.astype(np.float32), float(scores[best]), keypoints.astype(np.float32)))
        remaining = remaining[~overlap]
    return merged
