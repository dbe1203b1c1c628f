"""``FaceAnalyzer``: detection + landmarks on CPU replicas, batched over images. The only Ray code of this job."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import numpy as np
from ray import serve

from deployments.common.batching import ItemFailure, run_per_item
from deployments.common.deployment import (
    BATCH_DEFAULTS,
    apply_batch_config,
    batch_defaults,
    options_from,
    record_batch,
    record_faces,
    replica_facts,
    torch_threads,
)
from deployments.common.settings import get_model_settings
from deployments.faces.analyze import FACE_MODELS, MTCNN_MODELS, FaceAnalysisConfig, FaceAnalysisPredictor
from deployments.faces.types import Face

PROBE_IMAGE = np.full((64, 64, 3), 128, np.uint8)


@serve.deployment(name="FaceAnalyzer")
class FaceAnalyzer:
    def __init__(self) -> None:
        torch_threads(1)  # MTCNN runs in torch
        self._store = get_model_settings().open_model_store()
        self._statuses = [self._store.status(name) for name in FACE_MODELS + MTCNN_MODELS]
        self._predictor = FaceAnalysisPredictor.from_store(self._store, FaceAnalysisConfig(num_threads=1))
        self._batch = BATCH_DEFAULTS["FaceAnalyzer"]

    def reconfigure(self, user_config: dict[str, Any]) -> None:
        """``user_config``: batch keys plus any ``FaceAnalysisConfig`` field (``min_eye_px``, ``max_windows``...)."""
        self._batch, analysis = apply_batch_config(self.analyze, user_config, BATCH_DEFAULTS["FaceAnalyzer"])
        config = options_from(FaceAnalysisConfig, analysis, num_threads=1)
        self._predictor = FaceAnalysisPredictor.from_store(self._store, config)

    @serve.batch(**batch_defaults("FaceAnalyzer"))
    async def analyze(self, images: list[np.ndarray]) -> list[list[Face] | ItemFailure]:
        """One outcome per image: its faces, or its own error (``deployments.common.batching``)."""
        record_batch("FaceAnalyzer", len(images))
        predictor = self._predictor
        outcomes = await asyncio.to_thread(
            run_per_item, predictor.analyze_batch, images, predictor.admit, "FaceAnalyzer"
        )
        record_faces([len(found) for found in outcomes if not isinstance(found, ItemFailure)])
        return outcomes

    def check_health(self) -> None:
        """Serve's periodic probe: the interpreters answer (a blank image has no face)."""
        self._predictor.analyze(PROBE_IMAGE)

    async def health(self) -> dict[str, Any]:
        return {
            "status": "ok",
            "engine": self._statuses[0].spec.engine,
            "models": [status.to_json() for status in self._statuses],
            "batch": self._batch.model_dump(),
            "analysis": dataclasses.asdict(self._predictor.config),
            **replica_facts(),
        }
