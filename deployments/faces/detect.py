"""BlazeFace detection (MediaPipe short-range and full-range-sparse models) over a multi-scale window plan.

Coordinates: every point this module returns is in original-image pixel-index coordinates (pixel centres at integers,
the convention of ``cv2.warpAffine``). The models themselves answer in continuous input coordinates (0..input_px),
so each window carries the exact affine map between the two.

Why a window plan: the short-range model needs a face box of at least ~15 % of its 128 px input, the full-range
model ~10 % of 192 px, so one whole-image pass misses the small faces of group and family photos. Finer levels cut
the image (pre-shrunk with area averaging, no aliasing) into overlapping 128 px windows; each window keeps only the
faces whose centre lies in its own share of the overlap and that fit the overlap, so every face is seen whole once
per level, and weighted NMS merges levels.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from deployments.common.affine import apply_affine, pixel_scale_affine
from deployments.faces.detection import EYE_DISTANCE_PER_BOX, Detection, DetectionParams, View, weighted_nms
from deployments.faces.tflite import TfliteModel

logger = logging.getLogger(__name__)

# Measured on the astronaut face pasted at many sizes: reliable detection (score > 0.7) from these box fractions.
SHORT_RANGE_MIN_BOX_FRAC = 0.15
FULL_RANGE_MIN_BOX_FRAC = 0.10
# Tiles overlap by this fraction of their side; faces larger than the overlap are left to the next coarser level,
# which detects from 2 × SHORT_RANGE_MIN_BOX_FRAC of a tile side, so the two ranges meet.
TILE_OVERLAP_FRAC = 0.3
# BlazeFace's tile hits that become candidates in the small-face pass (confirmed in ``confirm``)
TILE_CANDIDATE_SCORE = 0.3
# The small-face pass also searches the photo smoothed by this Gaussian: film grain and JPEG blocks hide some grey
# 30–60 px faces of old prints from the networks, smoothing hides others; each copy finds faces the other misses
# (docs/BENCHMARKS.md, "No invented faces, third approach").
SMOOTHING_SIGMA_PX = 1.0
RAW_SCORE_CLIP = 80.0  # MediaPipe clips at 100; exp(100) overflows float32
DEFAULT_PARAMS = DetectionParams()  # frozen: one shared default


@dataclass(frozen=True)
class BlazeFaceSpec:
    """Anchor layout of one BlazeFace model (MediaPipe ``SsdAnchorsCalculator`` with ``fixed_anchor_size``)."""

    filename: str
    input_px: int
    anchor_layers: tuple[tuple[int, int], ...]  # (stride_px, anchors per cell); equal strides already merged

    def anchors(self) -> np.ndarray:
        """``(N, 2)`` anchor centres in continuous input pixels, in the model's output order."""
        centres = []
        for stride_px, per_cell in self.anchor_layers:
            cells = self.input_px // stride_px
            grid = (np.arange(cells, dtype=np.float32) + 0.5) * stride_px
            ys, xs = np.meshgrid(grid, grid, indexing="ij")
            xy = np.stack([xs.ravel(), ys.ravel()], axis=1)
            centres.append(np.repeat(xy, per_cell, axis=0))
        return np.concatenate(centres).astype(np.float32)


# Short range: strides 8,16,16,16 with 2 anchors per layer -> 16x16x2 + 8x8x6 = 896. Full range: stride 4, one
# anchor (interpolated_scale_aspect_ratio 0) -> 48x48 = 2304.
SHORT_RANGE = BlazeFaceSpec("face_detection_short_range.tflite", 128, ((8, 2), (16, 6)))
FULL_RANGE = BlazeFaceSpec("face_detection_full_range_sparse.tflite", 192, ((4, 1),))


@dataclass(frozen=True)
class _Window:
    """A square model input cut from a pyramid level: ``origin`` is its top-left in level pixels; ``own`` the
    level-pixel rectangle (x0, y0, x1, y1) whose faces it reports; ``max_box_px`` the largest face it keeps."""

    origin: tuple[float, float]
    own: tuple[float, float, float, float]
    max_box_px: float


@dataclass(frozen=True)
class _Level:
    size: tuple[int, int]  # (width, height) of the shrunk image the windows are cut from
    windows: tuple[_Window, ...]


class BlazeFaceModel:
    """One BlazeFace network plus its anchors; decodes one window into detections in window input pixels."""

    def __init__(self, models_dir: Path, spec: BlazeFaceSpec, *, num_threads: int) -> None:
        self.spec = spec
        self.model = TfliteModel(Path(models_dir) / spec.filename, num_threads=num_threads)
        self.anchors = spec.anchors()
        self.anchors.setflags(write=False)

    def run_window(self, window_rgb: np.ndarray, score_threshold: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Boxes ``(K, 4)`` (continuous input px), scores ``(K,)``, keypoints ``(K, 4, 2)`` above the threshold."""
        tensor = window_rgb.astype(np.float32)[None] * (1.0 / 127.5) - 1.0
        regressors, logits = self.model.run(tensor)
        raw = np.clip(logits[0, :, 0], -RAW_SCORE_CLIP, RAW_SCORE_CLIP)
        scores = 1.0 / (1.0 + np.exp(-raw))
        keep = np.flatnonzero(scores >= score_threshold)
        reg = regressors[0, keep]
        centres = self.anchors[keep] + reg[:, 0:2]
        half = reg[:, 2:4] * 0.5
        boxes = np.concatenate([centres - half, centres + half], axis=1)
        keypoints = reg[:, 4:12].reshape(-1, 4, 2) + self.anchors[keep][:, None, :]
        return boxes, scores[keep], keypoints


class FaceDetector:
    """Both BlazeFace models, the window plan and, when its weights are given, MTCNN and the judge of small faces
    (:mod:`deployments.faces.confirm`); holds models only (params travel with each call)."""

    def __init__(self, models_dir: Path | str, *, num_threads: int = 1, mtcnn_dir: Path | str | None = None) -> None:
        self.short_range = BlazeFaceModel(Path(models_dir), SHORT_RANGE, num_threads=num_threads)
        self.full_range = BlazeFaceModel(Path(models_dir), FULL_RANGE, num_threads=num_threads)
        self.mtcnn = self.judge = None
        if mtcnn_dir is not None:
            # torch loads only where MTCNN is used (confirm and mtcnn build on ``detection``, not on this module)
            from deployments.faces.confirm import ClassicDetectors, SmallFaceJudge
            from deployments.faces.mtcnn import Mtcnn

            self.mtcnn = Mtcnn(mtcnn_dir)
            self.judge = SmallFaceJudge(self.short_range.run_window, self.mtcnn.rate, ClassicDetectors())

    def detect(self, image_rgb: np.ndarray, params: DetectionParams = DEFAULT_PARAMS) -> list[Detection]:
        """All faces in ``image_rgb`` (HxWx3 uint8 RGB), highest score first.

        A portrait ends after the first whole-image pass. Any other photo also gets the full-range pass and the
        tiles; a large one, when MTCNN is loaded, the small-face pass: on the photo and on a copy smoothed by
        ``SMOOTHING_SIGMA_PX``, tiles from ``TILE_CANDIDATE_SCORE`` and MTCNN from its candidate score, all merged
        by weighted NMS, then judged by :class:`confirm.SmallFaceJudge` (small ones by agreement, large ones at
        ``score_threshold``).
        """
        height, width = image_rgb.shape[:2]
        pyramid = _Pyramid(image_rgb)
        first = self._first_pass(pyramid, params)
        if params.portrait_face_frac is not None and _is_portrait(first, width, height, params):
            return weighted_nms(first, params.nms_iou)
        if self.judge is None or not params.small_face_pass(width, height):
            return weighted_nms(first + self._search(pyramid, params, params.score_threshold), params.nms_iou)
        smoothed_rgb = cv2.GaussianBlur(image_rgb, (0, 0), SMOOTHING_SIGMA_PX)
        smoothed_pyramid = _Pyramid(smoothed_rgb)
        smoothed_first = self._first_pass(smoothed_pyramid, params)
        photo = View(image_rgb, first + self._search(pyramid, params, TILE_CANDIDATE_SCORE))
        smoothed = View(smoothed_rgb, smoothed_first + self._search(smoothed_pyramid, params, TILE_CANDIDATE_SCORE))
        found = []
        for view in (photo, smoothed):
            found += view.tile_hits + self.mtcnn.detect_small_faces(view.image_rgb, params)
        # weak large boxes on texture stay out, so they neither absorb nor swallow small faces
        candidates = [d for d in found if d.score >= params.score_threshold or d.size_px <= params.small_face_max_px]
        return self.judge.confirm(photo, smoothed, weighted_nms(candidates, params.nms_iou), params)

    def _first_pass(self, pyramid: _Pyramid, params: DetectionParams) -> list[Detection]:
        """The short-range model on the whole image, at ``params.score_threshold``."""
        width, height = pyramid.image.shape[1], pyramid.image.shape[0]
        whole = _whole_image_level(width, height, SHORT_RANGE)
        return self._run_level(self.short_range, pyramid, whole, params.score_threshold)

    def _search(self, pyramid: _Pyramid, params: DetectionParams, tile_threshold: float) -> list[Detection]:
        """What follows the first pass: the full-range model on the whole image (at ``params.score_threshold``) and
        the short-range model on the tiles (at ``tile_threshold``)."""
        width, height = pyramid.image.shape[1], pyramid.image.shape[0]
        found = self._run_level(
            self.full_range, pyramid, _whole_image_level(width, height, FULL_RANGE), params.score_threshold
        )
        for level in reversed(plan_tile_levels(width, height, params)):
            found += self._run_level(self.short_range, pyramid, level, tile_threshold)
        return found

    def _run_level(
        self, model: BlazeFaceModel, pyramid: _Pyramid, level: _Level, score_threshold: float
    ) -> list[Detection]:
        level_image, (sx, sy) = pyramid.at(level.size)
        level_to_image = pixel_scale_affine(1.0 / sx, 1.0 / sy)  # exact inverse of the resize
        input_px = model.spec.input_px
        found: list[Detection] = []
        for window in level.windows:
            ox, oy = window.origin
            to_window = np.array([[1.0, 0.0, -ox], [0.0, 1.0, -oy]])
            pixels = cv2.warpAffine(
                level_image, to_window, (input_px, input_px), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT
            )
            boxes, scores, keypoints = model.run_window(pixels, score_threshold)
            for box, score, points in zip(boxes, scores, keypoints):
                # continuous window px -> level pixel index -> image pixel index
                level_box = box + np.array([ox, oy, ox, oy]) - 0.5
                cx, cy = (level_box[0] + level_box[2]) / 2, (level_box[1] + level_box[3]) / 2
                own = window.own
                if not (own[0] <= cx < own[2] and own[1] <= cy < own[3]):
                    continue
                if max(level_box[2] - level_box[0], level_box[3] - level_box[1]) > window.max_box_px:
                    continue
                level_points = points + np.array([ox, oy]) - 0.5
                image_box = apply_affine(level_to_image, level_box.reshape(2, 2)).ravel()
                image_points = apply_affine(level_to_image, level_points)
                found.append(Detection(image_box.astype(np.float32), float(score), image_points.astype(np.float32)))
        return found


class _Pyramid:
    """Shrunk copies of one image, built on demand from the nearest larger copy (lives for one ``detect`` call).

    Each step halves with bilinear sampling, which at exactly 1/2 is a 2×2 box average (no aliasing, much faster
    than ``INTER_AREA``); every step maps pixel centres as ``(x + 0.5) * s - 0.5``, so the chain stays exact.
    """

    def __init__(self, image_rgb: np.ndarray) -> None:
        self.image = image_rgb
        self.copies: dict[tuple[int, int], np.ndarray] = {(image_rgb.shape[1], image_rgb.shape[0]): image_rgb}

    def at(self, size: tuple[int, int]) -> tuple[np.ndarray, tuple[float, float]]:
        """The image at ``size`` (width, height) and its exact per-axis scale from the original."""
        width, height = self.image.shape[1], self.image.shape[0]
        if size not in self.copies:
            source_size = min((s for s in self.copies if s[0] >= size[0] and s[1] >= size[1]), default=None)
            if source_size is None:  # upscaling (image smaller than a window)
                self.copies[size] = cv2.resize(self.image, size, interpolation=cv2.INTER_LINEAR)
            else:
                current = self.copies[source_size]
                while current.shape[1] >= 2 * size[0] and current.shape[0] >= 2 * size[1]:
                    half = (max(1, round(current.shape[1] / 2)), max(1, round(current.shape[0] / 2)))
                    current = self.copies.setdefault(half, cv2.resize(current, half, interpolation=cv2.INTER_LINEAR))
                self.copies[size] = cv2.resize(current, size, interpolation=cv2.INTER_LINEAR)
        return self.copies[size], (size[0] / width, size[1] / height)


def _is_portrait(found: list[Detection], width: int, height: int, params: DetectionParams) -> bool:
    """One face, and a large one, in the first pass: a portrait, where tiny background faces are not worth the
    tiling cost. Two or more faces mean a group, where more may hide at smaller scales."""
    faces = weighted_nms(found, params.nms_iou)
    return len(faces) == 1 and faces[0].size_px >= params.portrait_face_frac * max(width, height)


def _whole_image_level(width: int, height: int, spec: BlazeFaceSpec) -> _Level:
    """The whole image letterboxed (centred, black borders) into the model input, as MediaPipe does."""
    scale = spec.input_px / max(width, height)
    level_w, level_h = max(1, round(width * scale)), max(1, round(height * scale))
    origin = ((level_w - spec.input_px) / 2, (level_h - spec.input_px) / 2)
    inf = math.inf
    window = _Window(origin=origin, own=(-inf, -inf, inf, inf), max_box_px=inf)
    return _Level(size=(level_w, level_h), windows=(window,))


def plan_tile_levels(width: int, height: int, params: DetectionParams) -> list[_Level]:
    """Tile levels for the short-range model, finest first, so faces down to ``min_eye_px`` are found.

    Window sides double per level; a level is added while the previous one stops short of the faces the
    whole-image full-range pass finds. When the plan needs more than ``max_windows``, the finest side grows
    (small faces are then missed rather than the cost exploding on huge images).
    """
    input_px = SHORT_RANGE.input_px
    long_side = max(width, height)
    finest_px = params.min_eye_px / EYE_DISTANCE_PER_BOX / SHORT_RANGE_MIN_BOX_FRAC
    whole_min_box_px = FULL_RANGE_MIN_BOX_FRAC * long_side
    while True:
        sides = []
        side = finest_px
        while side < long_side and (not sides or TILE_OVERLAP_FRAC * sides[-1] < whole_min_box_px):
            sides.append(side)
            side *= 2
        levels = [_tile_level(width, height, input_px / s, input_px) for s in sides]
        count = sum(len(level.windows) for level in levels)
        if count <= params.max_windows:
            break
        finest_px *= 1.15
    if finest_px > params.min_eye_px / EYE_DISTANCE_PER_BOX / SHORT_RANGE_MIN_BOX_FRAC:
        logger.debug(
            "window budget %d: smallest eye distance raised to %.1f px",
            params.max_windows,
            finest_px * EYE_DISTANCE_PER_BOX * SHORT_RANGE_MIN_BOX_FRAC,
        )
    return levels


def _tile_level(width: int, height: int, scale: float, input_px: int) -> _Level:
    level_w, level_h = max(1, round(width * scale)), max(1, round(height * scale))
    xs, x_bounds = _axis_tiles(level_w, input_px)
    ys, y_bounds = _axis_tiles(level_h, input_px)
    overlap_px = min(_min_overlap(xs, input_px), _min_overlap(ys, input_px))
    windows = tuple(
        _Window(origin=(x, y), own=(x_bounds[i], y_bounds[j], x_bounds[i + 1], y_bounds[j + 1]), max_box_px=overlap_px)
        for j, y in enumerate(ys)
        for i, x in enumerate(xs)
    )
    return _Level(size=(level_w, level_h), windows=windows)


def _axis_tiles(length_px: int, tile_px: int) -> tuple[list[float], list[float]]:
    """Tile origins along one axis (first at 0, last flush with the end) and ownership bounds between centres."""
    if length_px <= tile_px:
        return [(length_px - tile_px) / 2], [-math.inf, math.inf]
    stride_px = tile_px * (1.0 - TILE_OVERLAP_FRAC)
    count = math.ceil((length_px - tile_px) / stride_px) + 1
    origins = [float(round(v)) for v in np.linspace(0, length_px - tile_px, count)]
    centres = [o + tile_px / 2 for o in origins]
    bounds = [-math.inf] + [(a + b) / 2 for a, b in zip(centres, centres[1:])] + [math.inf]
    return origins, bounds


def _min_overlap(origins: list[float], tile_px: int) -> float:
    if len(origins) < 2:
        return math.inf
    return tile_px - max(b - a for a, b in zip(origins, origins[1:]))
