"""Records that cross between the jobs and the ComplianceGate replicas (torch-free: the ingress unpickles them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from deployments.common.engine import EngineInfo
from deployments.common.stage import StageCall

# The reason code of a refusal by the detector, in the ID-photo report's vocabulary (deployments/idphoto/texts.py).
EXPLICIT_CONTENT = "explicit_content"


@dataclass(frozen=True, eq=False)
class PhotoToCheck:
    """A whole photo (HxWx3 uint8 RGB) before any model stage runs on it."""

    rgb: np.ndarray


@dataclass(frozen=True)
class Detection:
    """One of the detector's findings: a NudeNet class, its score, and its box ``(x, y, w, h)`` in photo pixels."""

    label: str
    score: float
    box: tuple[int, int, int, int]

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "score": round(self.score, 4), "box": list(self.box)}


@dataclass(frozen=True, eq=False)
class ComplianceVerdict:
    """What the detector found (``detections``) and which of those refuse the photo (``refusing``: a refused class
    at ``min_score`` or more, seen again at the same place in the mirrored photo when the gate checks that)."""

    detections: tuple[Detection, ...]
    refusing: tuple[Detection, ...]
    engine: EngineInfo

    @property
    def passed(self) -> bool:
        return not self.refusing

    @property
    def reason_codes(self) -> tuple[str, ...]:
        return () if self.passed else (EXPLICIT_CONTENT,)


COMPLIANCE_GATE = "ComplianceGate"
CHECK_PHOTO: StageCall[PhotoToCheck, ComplianceVerdict] = StageCall(COMPLIANCE_GATE, "check")
