"""``Colorizer``: DDColor, batched over photos from any request (the job sends each photo's 512² network input, and
lays the predicted colours on the photo itself). The only Ray code of this job."""

from __future__ import annotations

from ray import serve

from deployments.colorize.predictor import ColorizationPredictor, ColorizerOptions
from deployments.colorize.types import COLORIZER, PhotoToColorize, PredictedColor
from deployments.common.batching import ItemFailure
from deployments.common.deployment import ModelReplica
from deployments.common.stage import BatchConfig, Stage


@serve.deployment(name=COLORIZER)
class Colorizer(ModelReplica):
    stage = Stage(
        COLORIZER,
        BatchConfig(max_batch_size=4, batch_wait_timeout_s=0.02),
        ColorizerOptions,
        ColorizationPredictor,
        batched=("predict",),
        queries=("default_model",),
    )

    @serve.batch(**stage.batch.model_dump())
    async def predict(self, items: list[PhotoToColorize]) -> list[PredictedColor | ItemFailure]:
        return await self.run_batch("predict", items)
