"""Does the finished photo meet the standard? Measured on the output itself, not on what the geometry intended.

Every check carries its value, the allowed range, its unit and pass/fail; the verdict is ``pass`` only when all
checks pass. ``reasons`` says in words why a photo fails; ``notes`` records harmless facts (rotation applied,
side padding, upsampling) a careful caller may still want to know.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import cv2
import numpy as np

from deployments.common.affine import apply_affine, invert_affine
from deployments.idphoto.attire import AttireFit
from deployments.idphoto.parse import BACKGROUND, CLOTHES
from deployments.idphoto.texts import Lang, label, say

MAX_TILT_DEG = 2.0
MAX_CENTRE_OFFSET = 0.02
MAX_BACKGROUND_STD = 8.0
MIN_SHARPNESS = 20.0
MAX_SOURCE_SCALE = 1.5
MAX_EDGE_PADDING = 0.01
# The attire seam (eye distances, E): nothing at or above the neck line (NECK_LINE_E below the face) may change, so
# where the person's own collar reaches the chin a sliver of it up to the collar's top (0.08 E) stays by design.
MAX_ATTIRE_SEAM_GAP_E = 0.1
SEAM_NECK_SHARE = 0.6  # the seam is read across this share of the neck's narrower half (its sides may be hair)
SEAM_GAP_PERCENTILE = 75  # a gap along a quarter of those columns is a gap (an open shirt's skin fills the middle)
CHIN_COLUMN_E = 0.25  # the chin is judged in the columns this near the face's axis
_SEAM_ROWS_E = (-1.0, 2.0)  # the columns are read from above the mouth to well below the collar (E from the face's
# lowest point)


@dataclass(frozen=True)
class Check:
    name: str
    value: float | None
    low: float | None
    high: float | None
    unit: str
    passed: bool
    message: str | None = None  # the reason in words when the check fails; default: value against range

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "value": None if self.value is None else round(float(self.value), 4),
            "range": [self.low, self.high],
            "unit": self.unit,
            "passed": self.passed,
        }


@dataclass(frozen=True)
class ComplianceReport:
    """Checks and their verdict; ``reasons``, ``advice`` and ``notes`` in ``lang``; ``reason_codes`` for programs;
    ``skin_delta_e``: mean CIELAB ΔE of the face between the source and the result (how much its colour moved)."""

    spec: dict[str, Any]
    face_count: int
    checks: tuple[Check, ...]
    reasons: tuple[str, ...]
    notes: tuple[str, ...] = ()
    encoding: dict[str, Any] = field(default_factory=dict)
    reason_codes: tuple[str, ...] = ()
    advice: tuple[str, ...] = ()
    lang: Lang = "en"
    skin_delta_e: float | None = None

    @property
    def verdict(self) -> str:
        return "pass" if not self.reasons else "fail"

    @property
    def compliant(self) -> bool:
        return not self.reasons

    def check(self, name: str) -> Check:
        return next(c for c in self.checks if c.name == name)

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "lang": self.lang,
            "reasons": list(self.reasons),
            "reason_codes": list(self.reason_codes),
            "advice": list(self.advice),
            "notes": list(self.notes),
            "face_count": self.face_count,
            "skin_delta_e": None if self.skin_delta_e is None else round(self.skin_delta_e, 2),
            "spec": self.spec,
            "checks": [c.to_json() for c in self.checks],
            "encoding": self.encoding,
        }


def ranged(name: str, value: float | None, low: float | None, high: float | None, unit: str) -> Check:
    passed = value is not None and (low is None or value >= low - 1e-9) and (high is None or value <= high + 1e-9)
    return Check(name, value, low, high, unit, bool(passed))


def reasons_for(checks: tuple[Check, ...], lang: Lang) -> tuple[str, ...]:
    return tuple(_reason(c, lang) for c in checks if not c.passed)


def _reason(check: Check, lang: Lang) -> str:
    if check.message:
        return check.message
    if check.value is None:
        return say(lang, "not_measured", label=label(lang, check.name))
    return say(
        lang,
        "out_of_range",
        label=label(lang, check.name),
        value=f"{check.value:.3f}",
        unit=check.unit,
        low="" if check.low is None else check.low,
        high="" if check.high is None else check.high,
    )


def measure_crown_y(alpha: np.ndarray, centre_x: float, eye_y: float, face_width_px: float) -> tuple[float, bool]:
    """Top of the subject matte above the eyes in output pixels, and whether it touches the top edge."""
    height, width = alpha.shape
    columns = np.clip(np.round(centre_x + face_width_px * np.linspace(-0.3, 0.3, 7)).astype(int), 0, width - 1)
    eye_row = int(np.clip(round(eye_y), 0, height - 1))
    crown, touches = float(eye_row), False
    for x in columns:
        column = alpha[: eye_row + 1, x]
        if column[eye_row] < 0.5:
            continue
        outside = np.nonzero(column[::-1] < 0.5)[0]
        if outside.size == 0:
            crown, touches = 0.0, True
            continue
        crown = min(crown, float(eye_row - outside[0] + 1))
    return crown, touches


def background_std(output_rgb: np.ndarray, background_rgb: np.ndarray, alpha: np.ndarray) -> float | None:
    """Spread of the visible background around the intended one (leftover old background, halos)."""
    mask = (alpha < 0.1).astype(np.uint8)
    if cv2.countNonZero(mask) < 16:
        return None
    intended = np.clip(background_rgb * 255.0 + 0.5, 0, 255).astype(np.uint8)
    difference = cv2.absdiff(output_rgb, intended).astype(np.float32)
    return float(np.sqrt(sum(cv2.mean(difference * difference, mask=mask)[:3])))


def face_sharpness(output_rgb: np.ndarray, eyes_out: np.ndarray, chin_out: tuple[float, float]) -> float | None:
    """Variance of the Laplacian over the face (eyes to chin, eye distance wide on each side)."""
    eye_distance = float(np.linalg.norm(eyes_out[1] - eyes_out[0]))
    centre_x = float(eyes_out[:, 0].mean())
    top = int(max(0, eyes_out[:, 1].min() - 0.5 * eye_distance))
    bottom = int(min(output_rgb.shape[0], chin_out[1]))
    left = int(max(0, centre_x - eye_distance))
    right = int(min(output_rgb.shape[1], centre_x + eye_distance))
    if bottom - top < 8 or right - left < 8:
        return None
    gray = cv2.cvtColor(np.ascontiguousarray(output_rgb[top:bottom, left:right]), cv2.COLOR_RGB2GRAY)
    return float(cv2.Laplacian(gray, cv2.CV_64F).var())


def face_region(size_hw: tuple[int, int], eyes_out: np.ndarray, chin_out: tuple[float, float]) -> np.ndarray:
    """Boolean mask of the face's skin-dominated area: an ellipse from just below the eyes to just above the chin,
    about an eye distance and a half wide (cheeks, nose, mouth; no hair, no eyes)."""
    eye_mid = eyes_out.mean(axis=0)
    eye_distance = float(np.linalg.norm(eyes_out[1] - eyes_out[0]))
    top = float(eye_mid[1]) + 0.15 * eye_distance
    bottom = float(chin_out[1]) - 0.1 * max(1.0, float(chin_out[1]) - float(eye_mid[1]))
    mask = np.zeros(size_hw, np.uint8)
    if bottom - top < 4 or eye_distance < 4:
        return mask.astype(bool)
    centre = (int(round((float(eye_mid[0]) + chin_out[0]) / 2.0)), int(round((top + bottom) / 2.0)))
    axes = (int(round(0.75 * eye_distance)), int(round((bottom - top) / 2.0)))
    cv2.ellipse(mask, centre, axes, 0, 0, 360, 1, -1)
    return mask.astype(bool)


@dataclass(frozen=True)
class AttireSeam:
    """One dressed person's seam as delivered, in eye distances (E): how much background or old clothes shows
    between the neck and the collar (``SEAM_GAP_PERCENTILE`` over the neck's columns; None: no collar in the
    photo), and how far below the face's lowest point the clothes begin in the chin's columns (negative: they cover
    the chin; None: nothing covers those columns)."""

    gap_e: float | None
    chin_clearance_e: float | None


def measure_attire_seam(fit: AttireFit, labels: np.ndarray, affine: np.ndarray, size_wh: tuple[int, int]) -> AttireSeam:
    """Read one person's seam in the output (``affine``: source -> output, ``size_wh``: the output's size).

    The face, not the placement, is the reference: its eyes give the axes and the eye distance, its chin and mesh
    the lowest point of the face. A grid in that frame, one output pixel a step, from above the mouth past the collar
    and across the neck (``SEAM_NECK_SHARE`` of the placement's narrower neck half), is mapped back to the source
    to read the clothes' coverage (``fit.cover``) and the source's parse ``labels`` (where the clothes do not cover
    it, the output shows the source's pixel). Per column, the collar's edge is the first row the clothes cover at
    least half; its gap is the run of background or clothes right above that edge, each row counted by how much of
    it shows (1 - coverage)."""
    face = fit.face
    eyes = np.asarray(face.landmarks[:2], np.float64)
    eye_px = float(np.linalg.norm(eyes[1] - eyes[0]))
    right = (eyes[1] - eyes[0]) / eye_px
    down = np.array([-right[1], right[0]])
    chin = np.asarray(face.chin, np.float64)
    lowest_e = 0.0 if face.mesh is None else max(0.0, float(((face.mesh - chin) @ down).max()) / eye_px)
    linear = np.asarray(affine, np.float64)[:, :2]
    scale = math.sqrt(abs(float(np.linalg.det(linear))))
    eye_out = eye_px * scale
    step_e = 1.0 / max(eye_out, 1.0)
    half_e = max(SEAM_NECK_SHARE * min(fit.placement.neck_halves_e), CHIN_COLUMN_E)
    us = np.arange(-half_e, half_e + step_e / 2, step_e)
    vs = lowest_e + np.arange(_SEAM_ROWS_E[0], _SEAM_ROWS_E[1] + step_e / 2, step_e)
    chin_out = apply_affine(affine, chin[None])[0]
    right_out, down_out = linear @ right / scale, linear @ down / scale
    grid = chin_out + (us[None, :, None] * right_out + vs[:, None, None] * down_out) * eye_out
    width, height = size_wh
    delivered = (
        (grid[..., 0] >= -0.5) & (grid[..., 0] <= width - 0.5) & (grid[..., 1] >= -0.5) & (grid[..., 1] <= height - 0.5)
    )
    source = apply_affine(invert_affine(affine), grid.reshape(-1, 2)).reshape(grid.shape).astype(np.float32)
    cover = cv2.remap(fit.cover, source[..., 0], source[..., 1], cv2.INTER_LINEAR, borderValue=0)
    cover = cover.astype(np.float32) * np.float32(1.0 / 255.0)
    parts = cv2.remap(labels, source[..., 0], source[..., 1], cv2.INTER_NEAREST, borderValue=BACKGROUND)
    covered = (cover >= 0.5) & delivered
    collared = covered.any(axis=0)
    edge = np.argmax(covered, axis=0)
    chin_columns = collared & (np.abs(us) <= CHIN_COLUMN_E)
    clearance = float((vs[edge[chin_columns]] - lowest_e).min()) if chin_columns.any() else None
    showing = ((parts == BACKGROUND) | (parts == CLOTHES)) & delivered
    gaps = []
    for column in np.flatnonzero(collared):
        above = showing[: edge[column], column][::-1]
        run = above.size if above.all() else int(np.argmin(above))
        gaps.append(float((1.0 - cover[edge[column] - run : edge[column], column]).sum()) * step_e)
    return AttireSeam(float(np.percentile(gaps, SEAM_GAP_PERCENTILE)) if gaps else None, clearance)


def attire_checks(
    fits: Sequence[AttireFit], labels: np.ndarray, affine: np.ndarray, size_wh: tuple[int, int], lang: Lang
) -> list[Check]:
    """The dressed photo's seams, the worst person's: no gap of background or old clothes between the neck and the
    collar (at most ``MAX_ATTIRE_SEAM_GAP_E``), no clothes over the chin. Nothing to see (no collar in the photo,
    nothing in the chin's columns) passes."""
    seams = [measure_attire_seam(fit, labels, affine, size_wh) for fit in fits]
    gaps = [seam.gap_e for seam in seams if seam.gap_e is not None]
    clearances = [seam.chin_clearance_e for seam in seams if seam.chin_clearance_e is not None]
    gap = max(gaps) if gaps else None
    clearance = min(clearances) if clearances else None
    gap_message = None if gap is None else say(lang, "attire_seam_gap", gap=f"{gap:.2f}")
    return [
        Check(
            "attire_seam_gap",
            gap,
            0.0,
            MAX_ATTIRE_SEAM_GAP_E,
            "eye_distances",
            gap is None or gap <= MAX_ATTIRE_SEAM_GAP_E + 1e-9,
            message=gap_message,
        ),
        Check(
            "attire_covers_chin",
            clearance,
            0.0,
            None,
            "eye_distances",
            clearance is None or clearance >= 0.0,
            message=say(lang, "attire_covers_chin"),
        ),
    ]
