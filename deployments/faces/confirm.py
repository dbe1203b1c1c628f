"""Confirmation of the small-face pass: a candidate face of a group photo stays only if it survives a second look.

Why: the small-face pass lowers the bar (tiles at the small-face threshold, MTCNN) to find the grey 28–60 px faces of
old group photos, and so meets what real photos hold besides faces: a white collar under a chin, foliage, stone,
patterned cloth, a border's corner. A restorer then paints a face onto it. Measured on the generated photos with
that clutter (``tests/unit/faces/group_clutter.py``, tuning seeds 100–119): the face mesh's flag is ~0 on most true
faces of this size, and O-Net (also on mirrored and rescaled crops) is as confident on many false hits as on real
faces, so neither separates them. What does, and costs one 128 px window per candidate:

- a second look by BlazeFace at the scale it sees best (the candidate spanning ``RECHECK_BOX_FRAC`` of a centred
  window), which must find a face there at ``RECHECK_MIN_SCORE`` — an independent vote for MTCNN's candidates and
  for tiles that cut a face at an awkward scale;
- geometry among candidates: one whose centre lies inside a much larger candidate is a part of it, and one just
  below a larger candidate, about a face lower and narrower than it, is its collar, tie or hands.

With the small-face threshold raised from 0.5 to 0.6, false hits fell from 0.35 to 0.15 per photo on held-out
photos, for 5 % of the faces (``docs/BENCHMARKS.md``). Faces above ``small_face_max_px`` are not candidates: they
pass the main threshold as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import cv2
import numpy as np

if TYPE_CHECKING:
    from deployments.faces.detect import Detection, DetectionParams

# The small-face pass gathers candidates from this score (tiles and MTCNN's three stages); only those the params
# accept can stay, the rest are context for the geometry checks.
CANDIDATE_THRESHOLD = 0.5

RECHECK_WINDOW_PX = 128  # BlazeFace short-range input
RECHECK_BOX_FRAC = 0.4  # the candidate's side in the recheck window (the model's surest scale)
RECHECK_MIN_SCORE = 0.05
RECHECK_CENTRE_FRAC = 0.125  # how far (of the window) the recheck's face may sit from the candidate's centre
RECHECK_SIDE_RATIO = (0.5, 2.0)
NESTED_SIDE_RATIO = 1.4  # a candidate inside a box this much larger is a part of that face
# Below a face: centre 0.5–1.5 of the face's side lower, within 0.4 of its side sideways, narrower than 0.8 of it.
BELOW_DROP_PER_SIDE = (0.5, 1.5)
BELOW_SHIFT_PER_SIDE = 0.4
BELOW_SIDE_RATIO = 0.8

# (window HxWx3 uint8, min score) -> boxes (K, 4) in window px, scores (K,), keypoints; BlazeFaceModel.run_window
WindowRunner = Callable[[np.ndarray, float], tuple[np.ndarray, np.ndarray, np.ndarray]]


def is_candidate(detection: Detection, params: DetectionParams) -> bool:
    """What the small-face pass merges and weighs: a sure face, or a small one from ``CANDIDATE_THRESHOLD`` (weak
    large boxes on texture stay out, so they neither absorb nor swallow small faces)."""
    return detection.score >= params.score_threshold or (
        detection.score >= CANDIDATE_THRESHOLD and detection.size_px <= params.small_face_max_px
    )


def confirm_small_faces(
    image_rgb: np.ndarray, candidates: list[Detection], run_window: WindowRunner, params: DetectionParams
) -> list[Detection]:
    """The ``candidates`` (merged, pixel-index coordinates, down to ``CANDIDATE_THRESHOLD``) that ``params`` accepts,
    less the small ones (side up to ``params.small_face_max_px``) that are part of or just below a larger
    candidate, or that BlazeFace does not see again. Weak candidates count as context: a collar is dropped under a
    face too grey to be kept itself."""
    kept = []
    for index, detection in enumerate(candidates):
        if not params.accepts(detection):
            continue
        if detection.size_px > params.small_face_max_px:
            kept.append(detection)
            continue
        others = [other for position, other in enumerate(candidates) if position != index]
        if any(_is_part_of(detection, other) or _is_below(detection, other) for other in others):
            continue
        if recheck_score(image_rgb, detection, run_window) >= RECHECK_MIN_SCORE:
            kept.append(detection)
    return kept


def recheck_score(image_rgb: np.ndarray, detection: Detection, run_window: WindowRunner) -> float:
    """BlazeFace's best score for a face centred where ``detection`` is, at ``RECHECK_BOX_FRAC`` of a window."""
    centre = _centre(detection)
    scale = RECHECK_BOX_FRAC * RECHECK_WINDOW_PX / max(detection.size_px, 1.0)
    half = RECHECK_WINDOW_PX / 2.0
    to_window = np.array([[scale, 0.0, half - centre[0] * scale], [0.0, scale, half - centre[1] * scale]])
    window = cv2.warpAffine(
        image_rgb,
        to_window,
        (RECHECK_WINDOW_PX, RECHECK_WINDOW_PX),
        flags=cv2.INTER_LINEAR,
        borderMode=cv2.BORDER_CONSTANT,
    )
    boxes, scores, _ = run_window(window, RECHECK_MIN_SCORE)
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


def _centre(detection: Detection) -> np.ndarray:
    return (detection.box[:2] + detection.box[2:]) / 2.0


def _is_part_of(candidate: Detection, other: Detection) -> bool:
    x, y = _centre(candidate)
    x0, y0, x1, y1 = other.box
    return other.size_px >= NESTED_SIDE_RATIO * candidate.size_px and x0 <= x <= x1 and y0 <= y <= y1


def _is_below(candidate: Detection, other: Detection) -> bool:
    """Collar, tie or hands: about a face lower than ``other``, under it, and narrower."""
    side = other.size_px
    shift_x, drop_y = (_centre(candidate) - _centre(other)) / side
    return (
        BELOW_DROP_PER_SIDE[0] <= drop_y <= BELOW_DROP_PER_SIDE[1]
        and abs(shift_x) < BELOW_SHIFT_PER_SIDE
        and candidate.size_px < BELOW_SIDE_RATIO * side
    )
