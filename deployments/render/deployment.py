"""``Renderer``: a diffusers SDXL pipeline, compatible requests from any caller rendered in one pipeline call, each
streaming its steps; a LoRA set is a multiplexed model (``RenderRequest.lora_set``). The only Ray code of this stage."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import SimpleNamespace

from ray import serve

from deployments.common.deployment import ModelReplica, evictable
from deployments.common.stage import BatchConfig, Stage
from deployments.render.predictor import RendererOptions, RendererPredictor
from deployments.render.types import LORA_SETS_PER_REPLICA, RENDERER, RenderAnswer, RenderRequest


@serve.deployment(name=RENDERER)
class Renderer(ModelReplica):
    stage = Stage(
        RENDERER,
        BatchConfig(max_batch_size=4, batch_wait_timeout_s=0.05),
        RendererOptions,
        RendererPredictor,
        batched=("render",),
        streamed=("render",),
    )

    @serve.multiplexed(max_num_models_per_replica=LORA_SETS_PER_REPLICA)
    async def lora_set(self, lora_set: str) -> SimpleNamespace:
        return await evictable(self._predictor.load_lora_set, self._predictor.unload_lora_set, lora_set)

    async def render(self, item: RenderRequest) -> AsyncIterator[RenderAnswer]:
        async for answer in self.render_batch(item):
            yield answer

    @serve.batch(**stage.batch.model_dump())
    async def render_batch(self, items: list[RenderRequest]) -> AsyncIterator[list[RenderAnswer]]:
        await self.hold_multiplexed(self.lora_set)
        async for answers in self.stream_batch("render", items):
            yield answers
