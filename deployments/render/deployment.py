"""``Renderer``: a diffusers SDXL pipeline, compatible requests from any caller rendered in one pipeline call. The
only Ray code of this stage."""

from __future__ import annotations

from ray import serve

from deployments.common.batching import ItemFailure
from deployments.common.deployment import ModelReplica
from deployments.common.stage import BatchConfig, Stage
from deployments.render.predictor import RendererOptions, RendererPredictor
from deployments.render.types import RENDERER, Rendered, RenderRequest


@serve.deployment(name=RENDERER)
class Renderer(ModelReplica):
    stage = Stage(
        RENDERER,
        BatchConfig(max_batch_size=4, batch_wait_timeout_s=0.05),
        RendererOptions,
        RendererPredictor,
        batched=("render",),
    )

    @serve.batch(**stage.batch.model_dump())
    async def render(self, items: list[RenderRequest]) -> list[Rendered | ItemFailure]:
        return await self.run_batch("render", items)
