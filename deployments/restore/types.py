"""Records that cross from the restorer replicas to the ingress (torch-free: the ingress unpickles them)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from deployments.common.engine import EngineInfo


@dataclass(frozen=True, eq=False)
class RestoredFace:
    """One restored crop (HxWx3 uint8 RGB at the model's size) and the engine that produced it."""

    crop: np.ndarray
    engine: EngineInfo
