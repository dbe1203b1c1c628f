"""Confirmation of the small-face pass: a candidate face of a group photo stays only when independent looks agree.

Why: the small-face pass gathers candidates far below the usual bars (BlazeFace tiles from
``detect.TILE_CANDIDATE_SCORE``, MTCNN's three stages from ``mtcnn.MTCNN_CANDIDATE_SCORES``), on the photo and on a
smoothed copy of it (``detect.SMOOTHING_SIGMA_PX``: film grain and JPEG blocks hide some grey 30–60 px faces from
the networks, smoothing hides others), to reach the faces of old group photos, and so meets what real photos hold
besides faces: stone, foliage, patterned cloth, a collar, a border's corner. A restorer would paint a face onto each.
No single score separates them: on the cluttered photos of ``tests/unit/faces/group_clutter.py`` the face mesh's flag
is ~0 on most true faces of this size, and O-Net or BlazeFace alone rate blobs on stone as high as a quarter of the
faces. What does is agreement, on each ``detection.View``:

- O-Net on the candidate moved by ``SHIFT_PER_SIDE`` of its side four ways (a face stays a face; a blob's score
  falls), and where it puts the eyes: on a face they stay put when the crop moves or is mirrored, on texture they
  wander (``onet_eye_drift``, ``onet_mirror_eye_error``);
- R-Net on the same crop, BlazeFace at the scale it sees best and its tiles' own best hit there;
- detectors of other families, with other failures than the networks': OpenCV's Haar cascades (``cv2.data``,
  shipped with opencv-python, trained on grey 24 px faces) and dlib's HOG face detector (built into dlib).

:class:`Evidence` weighs the looks on both views in one logistic score. Then the row: the faces of a group photo stand
in rows of faces of about their size, and the stone, foliage and collars that still look like faces mostly do not.
:func:`row_neighbours` counts the sides (left, right) on which a candidate has a well-evidenced neighbour of its size
in its row, and :data:`ROW_LOGIT` weighs that with the evidence: a lone candidate needs strong looks, one between
two faces weaker ones. Both fits are on the candidates of the tuning photos (seeds 100–179;
``docs/BENCHMARKS.md`` has the measurement and the held-out seeds). The final probability is the score a confirmed
small face carries; ``DetectionParams.small_face_threshold`` is the bar. Faces above ``small_face_max_px`` are not
judged here: they pass the main threshold as before.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path

import cv2
import dlib
import numpy as np

from deployments.common.errors import ModelUnavailable
from deployments.faces.detection import (
    EYE_DISTANCE_PER_BOX,
    Detection,
    DetectionParams,
    View,
    box_overlap,
    non_max_suppression,
)

SHIFT_PER_SIDE = 0.12  # O-Net's four moved looks: the crop moved by this share of the candidate's side
RECHECK_WINDOW_PX = 128  # BlazeFace short-range input
RECHECK_BOX_FRAC = 0.3  # the candidate's side in the recheck window
RECHECK_CENTRE_FRAC = 0.125  # how far (of the window) the recheck's face may sit from the candidate's centre
RECHECK_SIDE_RATIO = (0.5, 2.0)
HAAR_CASCADES = ("haarcascade_frontalface_default.xml", "haarcascade_frontalface_alt2.xml")
HAAR_FACE_PX = (52, 30)  # the candidate's side in each cascade's window (its surest scale, measured)
HAAR_CENTRE_FRAC = (0.25, 0.3)  # how far (x, y, of the face side) a cascade's hit may sit from the centre
HAAR_SIZE_RANGE = (0.6, 1.5)
HOG_FACE_PX = 80  # the candidate's side in the HOG detector's window (its 80 px sliding window)
HOG_CENTRE_FRAC = (0.3, 0.35)
HOG_SIZE_RANGE = (0.5, 2.0)
HOG_FLOOR = -1.5  # dlib's adjust_threshold: hits from this score (its own bar is 0)
WINDOW_PER_FACE = 2.2  # a classic detector's window side per candidate side
PROBABILITY_CLIP = 1e-4
TILE_HIT_IOU = 0.3  # a tile hit counts for a candidate it overlaps this much (weighted NMS's default clustering)
# A candidate whose eyes (by the box) are under this share of ``min_eye_px`` is smaller than anything the pass looks
# for: dropped unjudged (the judge was fitted on faces from 28 px; a 15 px speck on an eval photo scored 0.88).
MIN_EYE_SHARE = 0.75
# The small candidates judged per photo, best detector score first: a bound on the judge's time (~0.12 s a candidate
# on one core). The tuning photos gave at most 396, 12 MP of noise 775 (90 s).
MAX_JUDGED = 512

# (window HxWx3 uint8, min score) -> boxes (K, 4) in window px, scores (K,), keypoints; BlazeFaceModel.run_window
WindowRunner = Callable[[np.ndarray, float], tuple[np.ndarray, np.ndarray, np.ndarray]]
# (image, centres (K, 2), sides (K,) of BlazeFace-style boxes, mirrored) -> O-Net probabilities (K,), O-Net's eyes
# (K, 2, 2) in image pixels, R-Net probabilities (K,); Mtcnn.rate
CropRater = Callable[[np.ndarray, np.ndarray, np.ndarray, bool], tuple[np.ndarray, np.ndarray, np.ndarray]]

# Logistic regression on the tuning candidates (standardised fit, folded back to raw units), one weight per look and
# view; probabilities enter as logits, eye errors capped at one side, a classic detector's silence as its floor
# (Looks.terms).
LOGIT_WEIGHTS = {
    "photo": {
        "onet_shifted": 0.0867,
        "onet_eye_drift": 0.7753,
        "onet_mirror_eye_error": -5.9641,
        "rnet": 0.0726,
        "blazeface": 0.2749,
        "blazeface_tiles": 0.0993,
        "haar_default": 0.0567,
        "haar_alt2": 0.0615,
        "hog": 0.3544,
    },
    "smoothed": {
        "onet_shifted": 0.146,
        "onet_eye_drift": -1.6971,
        "onet_mirror_eye_error": -2.9138,
        "rnet": 0.0865,
        "blazeface": 0.3464,
        "blazeface_tiles": 0.0929,
        "haar_default": 0.0519,
        "haar_alt2": 0.0583,
        "hog": 0.5846,
    },
}
LOGIT_BIAS = 3.998

# A neighbour in the row (row_neighbours): its evidence's probability from ROW_NEIGHBOUR_PROBABILITY, its side within
# ROW_SIDE_RATIO of the candidate's, its centre within ROW_DY_PER_SIDE candidate sides vertically and ROW_DX_PER_SIDE
# horizontally (from 0.7: not another box on the same face). Chosen on the tuning photos' cross-validation, with
# vertical and size room beyond the synthetic rows' (faces there vary ±15 % in size and ±0.15 side in height).
ROW_NEIGHBOUR_PROBABILITY = 0.9
ROW_SIDE_RATIO = (0.67, 1.5)
ROW_DY_PER_SIDE = 0.5
ROW_DX_PER_SIDE = (0.7, 5.0)
# Logistic regression on the tuning candidates: the final logit from the evidence's and the sides with a neighbour.
ROW_LOGIT = {"evidence": 1.189, "neighbours": 2.227, "bias": -1.091}


@dataclass(frozen=True)
class Looks:
    """What the looks on one view say about one small candidate."""

    onet_shifted: float  # mean O-Net probability over the four moved crops
    onet_eye_drift: float  # largest move of O-Net's eyes between the centred and a moved crop, per side
    onet_mirror_eye_error: float  # O-Net's eyes on the mirrored crop against the plain one, per side
    rnet: float  # R-Net's probability on the centred crop
    blazeface: float  # BlazeFace's best score for a face there at RECHECK_BOX_FRAC of its window
    blazeface_tiles: float  # the best BlazeFace hit of the pass on this candidate (0: MTCNN's alone)
    haar_default: float | None  # level weight of the default cascade's best hit there (None: no hit)
    haar_alt2: float | None  # the same for the alt2 cascade
    hog: float | None  # dlib's HOG detector's best score there, from HOG_FLOOR (None: no hit)

    def terms(self) -> dict[str, float]:
        return {
            "onet_shifted": _logit(self.onet_shifted),
            "onet_eye_drift": min(self.onet_eye_drift, 1.0),
            "onet_mirror_eye_error": min(self.onet_mirror_eye_error, 1.0),
            "rnet": _logit(self.rnet),
            "blazeface": _logit(self.blazeface),
            "blazeface_tiles": _logit(self.blazeface_tiles),
            "haar_default": -9.0 if self.haar_default is None else max(self.haar_default, -9.0),
            # alt2's weights sit near its last stage's threshold (~50): the margin over it tells
            "haar_alt2": -3.0 if self.haar_alt2 is None else max(self.haar_alt2 - 50.0, -2.0),
            "hog": HOG_FLOOR - 0.5 if self.hog is None else max(self.hog, HOG_FLOOR),
        }


@dataclass(frozen=True)
class Evidence:
    """The looks on the photo and on its smoothed copy; :meth:`logit` weighs them."""

    photo: Looks
    smoothed: Looks

    def logit(self) -> float:
        total = LOGIT_BIAS
        for view in fields(self):
            weights = LOGIT_WEIGHTS[view.name]
            total += sum(weights[name] * value for name, value in getattr(self, view.name).terms().items())
        return total

    def probability(self) -> float:
        return float(_sigmoid(np.float64(self.logit())))


class ClassicDetectors:
    """Detectors of hand-made features: the two frontal-face cascades from OpenCV's own data folder
    (``cv2.data.haarcascades``) and dlib's HOG face detector. Each keeps working buffers, so each calling thread gets
    its own (as ``TfliteModel`` does with interpreters)."""

    def __init__(self, folder: Path | str | None = None) -> None:
        self.folder = Path(folder if folder is not None else cv2.data.haarcascades)
        self._per_thread = threading.local()
        self.for_this_thread()  # a missing file fails at load, not on the first group photo

    def for_this_thread(self) -> tuple[tuple[cv2.CascadeClassifier, ...], dlib.fhog_object_detector]:
        detectors = getattr(self._per_thread, "detectors", None)
        if detectors is None:
            cascades = []
            for name in HAAR_CASCADES:
                cascade = cv2.CascadeClassifier(str(self.folder / name))
                if cascade.empty():
                    raise ModelUnavailable(f"OpenCV's Haar cascade {name} is missing from {self.folder}")
                cascades.append(cascade)
            detectors = self._per_thread.detectors = (tuple(cascades), dlib.get_frontal_face_detector())
        return detectors


class SmallFaceJudge:
    """Gathers the :class:`Evidence` on small candidates and keeps those it confirms; holds models only."""

    def __init__(self, run_window: WindowRunner, rate_crops: CropRater, classic: ClassicDetectors) -> None:
        self.run_window = run_window
        self.rate_crops = rate_crops
        self.classic = classic

    def confirm(
        self, photo: View, smoothed: View, candidates: list[Detection], params: DetectionParams
    ) -> list[Detection]:
        """The ``candidates`` (merged, pixel-index coordinates) to keep: large ones at ``params.score_threshold``,
        small ones (side up to ``params.small_face_max_px``, from ``MIN_EYE_SHARE`` of the smallest planned face;
        the ``MAX_JUDGED`` best) when their evidence and their row reach ``params.small_face_threshold`` (their
        score becomes that probability); then, best first, none that lies mostly inside a kept face."""
        min_side_px = MIN_EYE_SHARE * params.min_eye_px / EYE_DISTANCE_PER_BOX
        small = [d for d in candidates if min_side_px <= d.size_px <= params.small_face_max_px]
        small = sorted(small, key=lambda d: d.score, reverse=True)[:MAX_JUDGED]
        kept = [d for d in candidates if d.size_px > params.small_face_max_px and d.score >= params.score_threshold]
        if small:
            evidence_logits = np.array([e.logit() for e in self.gather(photo, smoothed, small)])
            probabilities = judged_probabilities(np.stack([d.box for d in small]), evidence_logits)
            for detection, probability in zip(small, probabilities):
                if probability >= params.small_face_threshold:
                    kept.append(Detection(detection.box, float(probability), detection.keypoints))
        if not kept:
            return []
        order = non_max_suppression(
            np.stack([d.box for d in kept]), np.array([d.score for d in kept]), 0.5, overlap="min"
        )
        return [kept[index] for index in order]

    def gather(self, photo: View, smoothed: View, small: list[Detection]) -> list[Evidence]:
        return [Evidence(*pair) for pair in zip(self.look(photo, small), self.look(smoothed, small))]

    def look(self, view: View, small: list[Detection]) -> list[Looks]:
        """Every look at each of the ``small`` candidates on one view."""
        if not small:
            return []
        image_rgb = view.image_rgb
        sides = np.array([d.size_px for d in small])
        centres = np.stack([(d.box[:2] + d.box[2:]) / 2.0 for d in small])
        _, eyes, rnet = self.rate_crops(image_rgb, centres, sides, False)
        _, mirror_eyes, _ = self.rate_crops(image_rgb, centres, sides, True)
        moves = ((SHIFT_PER_SIDE, 0.0), (-SHIFT_PER_SIDE, 0.0), (0.0, SHIFT_PER_SIDE), (0.0, -SHIFT_PER_SIDE))
        moved = [self.rate_crops(image_rgb, centres + np.array(move) * sides[:, None], sides, False) for move in moves]
        gray = cv2.cvtColor(image_rgb, cv2.COLOR_RGB2GRAY)
        tile_boxes = np.stack([d.box for d in view.tile_hits]) if view.tile_hits else np.zeros((0, 4), np.float32)
        tile_scores = np.array([d.score for d in view.tile_hits])
        cascades, hog = self.classic.for_this_thread()
        looks = []
        for index, (detection, side, centre) in enumerate(zip(small, sides, centres)):
            overlapping = box_overlap(detection.box, tile_boxes) > TILE_HIT_IOU
            haar = [_haar_weight(gray, centre, side, cascade, px) for cascade, px in zip(cascades, HAAR_FACE_PX)]
            looks.append(
                Looks(
                    onet_shifted=float(np.mean([look[0][index] for look in moved])),
                    onet_eye_drift=max(_eye_error(look[1][index], eyes[index], side) for look in moved),
                    onet_mirror_eye_error=_eye_error(mirror_eyes[index], eyes[index], side),
                    rnet=float(rnet[index]),
                    blazeface=self._recheck(image_rgb, centre, side),
                    blazeface_tiles=float(tile_scores[overlapping].max()) if overlapping.any() else 0.0,
                    haar_default=haar[0],
                    haar_alt2=haar[1],
                    hog=_hog_score(gray, centre, side, hog),
                )
            )
        return looks

    def _recheck(self, image_rgb: np.ndarray, centre: np.ndarray, side: float) -> float:
        """BlazeFace's best score for a face centred at ``centre``, at ``RECHECK_BOX_FRAC`` of a window."""
        scale = RECHECK_BOX_FRAC * RECHECK_WINDOW_PX / max(side, 1.0)
        half = RECHECK_WINDOW_PX / 2.0
        to_window = np.array([[scale, 0.0, half - centre[0] * scale], [0.0, scale, half - centre[1] * scale]])
        window = cv2.warpAffine(image_rgb, to_window, (RECHECK_WINDOW_PX, RECHECK_WINDOW_PX), flags=cv2.INTER_LINEAR)
        boxes, scores, _ = self.run_window(window, 0.01)
        expected_side = RECHECK_BOX_FRAC * RECHECK_WINDOW_PX
        best = 0.0
        for box, score in zip(boxes, scores):
            offset = np.abs((box[:2] + box[2:]) / 2.0 - half)
            ratio = (box[2] - box[0]) / expected_side
            if (
                offset.max() < RECHECK_CENTRE_FRAC * RECHECK_WINDOW_PX
                and RECHECK_SIDE_RATIO[0] < ratio < RECHECK_SIDE_RATIO[1]
            ):
                best = max(best, float(score))
        return best


def judged_probabilities(boxes: np.ndarray, evidence_logits: np.ndarray) -> np.ndarray:
    """The probability that each small candidate (``boxes`` ``(K, 4)``) is a face: its evidence's logit weighed
    with its row (:data:`ROW_LOGIT`, :func:`row_neighbours`)."""
    neighbours = row_neighbours(boxes, _sigmoid(evidence_logits))
    return _sigmoid(ROW_LOGIT["evidence"] * evidence_logits + ROW_LOGIT["neighbours"] * neighbours + ROW_LOGIT["bias"])


def row_neighbours(boxes: np.ndarray, probabilities: np.ndarray) -> np.ndarray:
    """For each box ``(K, 4)``, on how many of its two sides (0, 1 or 2) a box of ``probabilities`` from
    ``ROW_NEIGHBOUR_PROBABILITY`` stands in its row at its size (``ROW_SIDE_RATIO``, ``ROW_DY_PER_SIDE``,
    ``ROW_DX_PER_SIDE``)."""
    centres = (boxes[:, :2] + boxes[:, 2:]) / 2.0
    sides = np.maximum(boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1])
    # row i, column j: box j seen from box i, in box i's sides
    ratio = sides[None, :] / sides[:, None]
    dx = (centres[None, :, 0] - centres[:, None, 0]) / sides[:, None]
    dy = np.abs(centres[None, :, 1] - centres[:, None, 1]) / sides[:, None]
    near = (
        (probabilities[None, :] >= ROW_NEIGHBOUR_PROBABILITY)
        & (ROW_SIDE_RATIO[0] <= ratio)
        & (ratio <= ROW_SIDE_RATIO[1])
        & (dy <= ROW_DY_PER_SIDE)
    )
    low, high = ROW_DX_PER_SIDE
    right = (near & (low <= dx) & (dx <= high)).any(axis=1)
    left = (near & (-high <= dx) & (dx <= -low)).any(axis=1)
    return right.astype(np.int64) + left.astype(np.int64)


def _face_window(gray: np.ndarray, centre: np.ndarray, side: float, face_px: int) -> np.ndarray:
    """A square grey window ``WINDOW_PER_FACE`` faces wide around ``centre``, the candidate scaled to ``face_px``."""
    scale = face_px / max(side, 1.0)
    window_px = int(face_px * WINDOW_PER_FACE)
    to_window = np.array(
        [[scale, 0.0, window_px / 2 - centre[0] * scale], [0.0, scale, window_px / 2 - centre[1] * scale]]
    )
    interpolation = cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR
    return cv2.warpAffine(gray, to_window, (window_px, window_px), flags=interpolation)


def _best_centred(
    hits: list[tuple[float, float, float, float]],
    window_px: int,
    face_px: int,
    centre_frac: tuple[float, float],
    size_range: tuple[float, float],
) -> float | None:
    """The best score among ``hits`` (x, y, width, score) centred in the window as a face of ``face_px``."""
    best = None
    for x, y, width, score in hits:
        if (
            abs(x + width / 2 - window_px / 2) < centre_frac[0] * face_px
            and abs(y + width / 2 - window_px / 2) < centre_frac[1] * face_px
            and size_range[0] * face_px <= width <= size_range[1] * face_px
        ):
            best = score if best is None else max(best, score)
    return best


def _haar_weight(
    gray: np.ndarray, centre: np.ndarray, side: float, cascade: cv2.CascadeClassifier, face_px: int
) -> float | None:
    """The cascade's best level weight for a face at ``centre`` (the candidate scaled to ``face_px``), on the
    window and its mirror; ``None`` when no hit sits there."""
    window = _face_window(gray, centre, side, face_px)
    sizes = tuple(int(face_px * f) for f in HAAR_SIZE_RANGE)
    hits = []
    for view in (window, np.ascontiguousarray(window[:, ::-1])):
        rects, _, weights = cascade.detectMultiScale3(
            view,
            scaleFactor=1.05,
            minNeighbors=0,
            minSize=(sizes[0], sizes[0]),
            maxSize=(sizes[1], sizes[1]),
            outputRejectLevels=True,
        )
        hits += [
            (x, y, w, float(weight)) for (x, y, w, _), weight in zip(rects, np.ravel(weights) if len(rects) else [])
        ]
    return _best_centred(hits, window.shape[1], face_px, HAAR_CENTRE_FRAC, (0.0, math.inf))


def _hog_score(gray: np.ndarray, centre: np.ndarray, side: float, hog: dlib.fhog_object_detector) -> float | None:
    """dlib's HOG detector's best score from ``HOG_FLOOR`` for a face at ``centre``, on the window and its mirror;
    ``None`` when no hit sits there."""
    window = _face_window(gray, centre, side, HOG_FACE_PX)
    hits = []
    for view in (window, np.ascontiguousarray(window[:, ::-1])):
        rects, scores, _ = hog.run(view, 0, HOG_FLOOR)
        hits += [(r.left(), r.top(), r.width(), float(score)) for r, score in zip(rects, scores)]
    return _best_centred(hits, window.shape[1], HOG_FACE_PX, HOG_CENTRE_FRAC, HOG_SIZE_RANGE)


def _eye_error(eyes_a: np.ndarray, eyes_b: np.ndarray, side: float) -> float:
    """The larger distance between matching eyes (each pair sorted left to right), per candidate side."""
    a = sorted(eyes_a, key=lambda point: point[0])
    b = sorted(eyes_b, key=lambda point: point[0])
    return float(max(np.linalg.norm(a[0] - b[0]), np.linalg.norm(a[1] - b[1])) / max(side, 1.0))


def _sigmoid(logits: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-logits))


def _logit(probability: float) -> float:
    p = min(max(probability, PROBABILITY_CLIP), 1.0 - PROBABILITY_CLIP)
    return math.log(p / (1.0 - p))
