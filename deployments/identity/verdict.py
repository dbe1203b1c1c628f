"""Two embeddings → ``Identity`` (pure numpy: the ingress compares what the judge embedded)."""

from __future__ import annotations

import numpy as np

from deployments.common.errors import InternalError
from deployments.identity.types import FaceEmbedding, Identity

COSINE = "sface"  # judges whose similarity is the cosine of their embeddings; the others: 1 − euclidean distance


def compare(a: FaceEmbedding, b: FaceEmbedding) -> Identity:
    """The verdict of the judge that embedded both (two judges' embeddings do not compare: our bug)."""
    if a.judge.name != b.judge.name:
        raise InternalError(f"embeddings of two judges ({a.judge.name}, {b.judge.name}) do not compare")
    if a.judge.name == COSINE:
        norms = float(np.linalg.norm(a.vector) * np.linalg.norm(b.vector)) or 1.0
        similarity = float(np.dot(a.vector, b.vector)) / norms
    else:
        similarity = 1.0 - float(np.linalg.norm(a.vector - b.vector))
    return Identity(similarity, similarity >= a.judge.threshold, a.judge.name, a.judge.threshold)
