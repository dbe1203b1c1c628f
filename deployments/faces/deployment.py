"""``FaceAnalyzer``: detection + landmarks on CPU replicas, batched over images. The only Ray code of this job."""

from __future__ import annotations

import numpy as np
from ray import serve

from deployments.common.batching import ItemFailure
from deployments.common.deployment import ModelReplica, record_faces
from deployments.common.stage import BatchConfig, Stage
from deployments.faces.analyze import FaceAnalysisConfig, FaceAnalysisPredictor
from deployments.faces.types import FACE_ANALYZER, Face


@serve.deployment(name=FACE_ANALYZER)
class FaceAnalyzer(ModelReplica):
    stage = Stage(
        FACE_ANALYZER,
        BatchConfig(max_batch_size=4, batch_wait_timeout_s=0.01),
        FaceAnalysisConfig,
        FaceAnalysisPredictor.from_store,
        batched=("analyze_batch",),
        fixed={"num_threads": 1},
    )

    @serve.batch(**stage.batch.model_dump())
    async def analyze_batch(self, images: list[np.ndarray]) -> list[list[Face] | ItemFailure]:
        outcomes = await self.run_batch("analyze_batch", images)
        record_faces([len(found) for found in outcomes if not isinstance(found, ItemFailure)])
        return outcomes
