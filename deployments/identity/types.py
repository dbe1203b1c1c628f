"""Records that cross between the ``IdentityJudge`` replicas and the ingress (torch-free), and the verdict.

A face reaches the judge as ``FaceToJudge``: an image around one face (HxWx3 uint8 RGB) and its five landmarks in that
image's pixels (the ``Face.landmarks`` order: image-left eye, image-right eye, nose, image-left and image-right mouth
corner). Each judge aligns it as its own model was trained (SFace: the 112² ArcFace crop; dlib: its 5-point shape
model and 150² chip), so a job may send a whole-photo region or one of our template crops alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from deployments.common.engine import EngineInfo
from deployments.common.stage import StageCall


@dataclass(frozen=True, eq=False)
class FaceToJudge:
    image: np.ndarray
    landmarks: np.ndarray  # (5, 2) float, in ``image`` pixels


@dataclass(frozen=True)
class Judge:
    """Which judge embeds, and its operating point: two faces are one person when ``similarity >= threshold``.

    ``similarity`` is the judge's own measure, higher = more alike: cosine for SFace, 1 − euclidean distance for
    dlib (its 0.6 distance is a 0.4 similarity)."""

    name: str
    threshold: float
    engine: EngineInfo

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "threshold": self.threshold, **self.engine.to_json()}


@dataclass(frozen=True, eq=False)
class FaceEmbedding:
    vector: np.ndarray  # float32 (D,)
    judge: Judge


@dataclass(frozen=True)
class Identity:
    """How far a face moved: the similarity of two embeddings, and the judge's verdict."""

    similarity: float
    same_person: bool
    judge: str
    threshold: float

    def to_json(self) -> dict[str, Any]:
        return {
            "similarity": round(self.similarity, 4),
            "same_person": self.same_person,
            "judge": self.judge,
            "threshold": self.threshold,
        }


IDENTITY_JUDGE = "IdentityJudge"
EMBED_FACE: StageCall[FaceToJudge, FaceEmbedding] = StageCall(IDENTITY_JUDGE, "embed")
