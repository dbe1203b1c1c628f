"""``PortraitMatter``: MODNet (default) and selfie matting, batched over photos from any request. The only Ray code
of this job.

It returns each model's matte on its own small canvas with the affine back to the photo (MODNet: about 512x680
float32, ~1.4 MB; selfie: 256x256); refinement and compositing happen at the small output resolution in the ID-photo
pipeline, so full-resolution mattes never cross the object store.
"""

from __future__ import annotations

from ray import serve

from deployments.common.batching import ItemFailure
from deployments.common.deployment import ModelReplica
from deployments.common.stage import BatchConfig, Stage
from deployments.idphoto.matte import PORTRAIT_MATTER, LowResMatte, PhotoToMatte
from deployments.idphoto.predictor import MatterOptions, MattingPredictor


@serve.deployment(name=PORTRAIT_MATTER)
class PortraitMatter(ModelReplica):
    stage = Stage(
        PORTRAIT_MATTER,
        BatchConfig(max_batch_size=8, batch_wait_timeout_s=0.005),
        MatterOptions,
        MattingPredictor.from_store,
        batched=("segment_batch",),
    )

    @serve.batch(**stage.batch.model_dump())
    async def segment_batch(self, items: list[PhotoToMatte]) -> list[LowResMatte | ItemFailure]:
        return await self.run_batch("segment_batch", items)
