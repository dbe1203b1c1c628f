"""The predictor a ``ComplianceGate`` replica holds: NudeNet's detector over whole photos, the photo and its mirror in
one forward pass, and the rule that turns its findings into a refusal.

A photo is refused when the detector finds a refused class (``classes``) at ``min_score`` or more, and, with
``mirror_check`` (the default), finds the same class at the same place in the mirrored photo too (at NudeNet's own
0.25 or more): a real finding survives a mirror, a chance pattern mostly does not. On the evaluation photos the one
refused-class finding (0.53, a face half under a hat) is gone in the mirror (``docs/BENCHMARKS.md``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from deployments.common.admission import MIN_PHOTO_SIDE_PX, PHOTO_STAGE_INPUT
from deployments.common.engine import EngineInfo
from deployments.common.errors import InvalidParameter
from deployments.common.image import require_image
from deployments.common.weights import ModelStore
from deployments.compliance.nudenet import LABELS, NudeNetDetector
from deployments.compliance.types import ComplianceVerdict, Detection, PhotoToCheck

logger = logging.getLogger(__name__)

DETECTOR_MODEL = "nudenet-320n"
# Exposed genitals, breasts, buttocks and anus; not the covered classes, faces, bellies, armpits, feet or a bare male
# chest (a swimmer's ID photo is still a photo).
REFUSED_CLASSES: tuple[str, ...] = (
    "FEMALE_GENITALIA_EXPOSED",
    "MALE_GENITALIA_EXPOSED",
    "FEMALE_BREAST_EXPOSED",
    "BUTTOCKS_EXPOSED",
    "ANUS_EXPOSED",
)
MIRROR_IOU = 0.3  # the mirrored finding's box, mirrored back, overlaps the first this much or more


@dataclass(frozen=True)
class GateOptions:
    """``classes``: the NudeNet classes that refuse a photo; ``min_score``: the score that counts; ``mirror_check``:
    a refusal needs the mirrored photo to agree; ``model``: the manifest's detector, or None to run none (the
    language model's verdict alone then judges, where one is configured)."""

    classes: tuple[str, ...] = REFUSED_CLASSES
    min_score: float = 0.5
    mirror_check: bool = True
    model: str | None = DETECTOR_MODEL

    def __post_init__(self) -> None:
        object.__setattr__(self, "classes", tuple(self.classes))  # a YAML list
        unknown = sorted(set(self.classes) - set(LABELS))
        if unknown:
            raise InvalidParameter(f"ComplianceGate classes {unknown} are not NudeNet's; it has {list(LABELS)}")
        if not 0.25 <= self.min_score <= 1.0:
            raise InvalidParameter(
                f"ComplianceGate min_score is in [0.25, 1] (NudeNet reports nothing under 0.25), got {self.min_score}"
            )


class CompliancePredictor:
    """``check`` runs every photo of a batch and its mirror in one forward pass. The detector loads on the first
    batch (a replica without the built-in still answers: 503 naming the command that fetches it)."""

    def __init__(self, store: ModelStore, options: GateOptions = GateOptions()) -> None:
        self.store = store
        self.options = options
        self._detector: NudeNetDetector | None = None
        self._engine: EngineInfo | None = None
        self._lock = threading.Lock()

    def admit(self, item: PhotoToCheck) -> None:
        require_image(item.rgb, what="compliance input", min_side_px=MIN_PHOTO_SIDE_PX)
        PHOTO_STAGE_INPUT.admit_image(item.rgb)

    def probe(self) -> None:
        """Nothing to run: the detector loads on first use."""

    def health(self) -> dict[str, Any]:
        if self.options.model is None:
            return {"status": "ok", "engine": "none", "models": []}
        status = self.store.status(self.options.model)
        return {
            "status": "ok" if status.usable else "degraded",
            "engine": status.spec.engine if status.usable else "none",
            "models": [status.to_json()],
        }

    def check(self, items: Sequence[PhotoToCheck]) -> list[ComplianceVerdict]:
        if self.options.model is None:
            return [ComplianceVerdict((), (), EngineInfo("none", neural=False)) for _ in items]
        detector, engine = self._loaded()
        views = [item.rgb for item in items]
        if self.options.mirror_check:
            views += [np.ascontiguousarray(item.rgb[:, ::-1]) for item in items]
        found = detector.detect(views)
        verdicts = []
        for index, item in enumerate(items):
            direct = found[index]
            mirrored = (
                [_mirror(d, item.rgb.shape[1]) for d in found[len(items) + index]]
                if self.options.mirror_check
                else None
            )
            verdicts.append(ComplianceVerdict(tuple(direct), self._refusing(direct, mirrored), engine))
        return verdicts

    def _refusing(self, direct: list[Detection], mirrored: list[Detection] | None) -> tuple[Detection, ...]:
        """The findings that refuse: a refused class at ``min_score`` in one view, confirmed by the other view."""
        options = self.options

        def strong(detections: list[Detection]) -> list[Detection]:
            return [d for d in detections if d.label in options.classes and d.score >= options.min_score]

        if mirrored is None:
            return tuple(strong(direct))
        confirmed = [d for d in strong(direct) if _seen(d, mirrored)]
        confirmed += [d for d in strong(mirrored) if _seen(d, direct) and not _seen(d, confirmed)]
        return tuple(confirmed)

    def _loaded(self) -> tuple[NudeNetDetector, EngineInfo]:
        with self._lock:
            if self._detector is None:
                model = str(self.options.model)
                self._detector = NudeNetDetector(self.store.resolve(model))
                self._engine = EngineInfo.from_weights(self.store.status(model))
                logger.info("%s loaded", model)
            return self._detector, self._engine  # type: ignore[return-value]


def _mirror(detection: Detection, width: int) -> Detection:
    """A finding of the mirrored photo, put back on the photo."""
    x, y, w, h = detection.box
    return Detection(detection.label, detection.score, (width - x - w, y, w, h))


def _seen(detection: Detection, others: list[Detection]) -> bool:
    return any(other.label == detection.label and _iou(detection.box, other.box) >= MIRROR_IOU for other in others)


def _iou(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> float:
    left, top = max(a[0], b[0]), max(a[1], b[1])
    right, bottom = min(a[0] + a[2], b[0] + b[2]), min(a[1] + a[3], b[1] + b[3])
    inter = max(0, right - left) * max(0, bottom - top)
    union = a[2] * a[3] + b[2] * b[3] - inter
    return inter / union if union > 0 else 0.0
