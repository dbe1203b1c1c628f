"""Records that cross between the colorize job and the Colorizer replicas (torch-free: the ingress unpickles them)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from deployments.common.engine import EngineInfo
from deployments.common.stage import StageCall


@dataclass(frozen=True, eq=False)
class PhotoToColorize:
    """One photo's network input (``pipeline.gray_input``: 3×S×S float32) and the colorization model to run."""

    gray: np.ndarray
    model: str


@dataclass(frozen=True, eq=False)
class PredictedColor:
    """The predicted Lab ``(a, b)`` (2×S×S float32; ``pipeline.join_color`` puts it on the photo) and the engine."""

    ab: np.ndarray
    engine: EngineInfo


COLORIZER = "Colorizer"
COLORIZE: StageCall[PhotoToColorize, PredictedColor] = StageCall(COLORIZER, "predict")
# The model a job without ``model`` gets: asked every time, so weights pulled later count.
DEFAULT_COLORIZE_MODEL: StageCall[None, str] = StageCall(COLORIZER, "default_model", batched=False)
