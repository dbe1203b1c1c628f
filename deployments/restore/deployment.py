"""``FaceRestorer`` (bound once per restoration model the app deploys, batched over aligned face crops from any
request) and ``BackgroundUpscaler`` (Real-ESRGAN, batched over background tiles from any photo). The only Ray code of
this job."""

from __future__ import annotations

from ray import serve

from deployments.common.batching import ItemFailure
from deployments.common.deployment import ModelReplica
from deployments.common.stage import BatchConfig, Stage
from deployments.restore.params import restorer_bindings
from deployments.restore.restorer import RestorationPredictor, RestorerOptions
from deployments.restore.types import (
    BACKGROUND_UPSCALER,
    FACE_RESTORER,
    FaceToRestore,
    RestoredFace,
    TileToUpscale,
    UpscaledTile,
)
from deployments.restore.upscaler import UpscalePredictor, UpscalerOptions


@serve.deployment(name=FACE_RESTORER)
class FaceRestorer(ModelReplica):
    stage = Stage(
        FACE_RESTORER,
        BatchConfig(max_batch_size=8, batch_wait_timeout_s=0.02),
        RestorerOptions,
        RestorationPredictor,
        batched=("restore",),
        queries=("engine_info",),
        bindings=restorer_bindings,
    )

    @serve.batch(**stage.batch.model_dump())
    async def restore(self, faces: list[FaceToRestore]) -> list[RestoredFace | ItemFailure]:
        return await self.run_batch("restore", faces)


@serve.deployment(name=BACKGROUND_UPSCALER)
class BackgroundUpscaler(ModelReplica):
    stage = Stage(
        BACKGROUND_UPSCALER,
        BatchConfig(max_batch_size=8, batch_wait_timeout_s=0.01),
        UpscalerOptions,
        UpscalePredictor,
        batched=("upscale",),
        queries=("engine_for",),
    )

    @serve.batch(**stage.batch.model_dump())
    async def upscale(self, tiles: list[TileToUpscale]) -> list[UpscaledTile | ItemFailure]:
        return await self.run_batch("upscale", tiles)
