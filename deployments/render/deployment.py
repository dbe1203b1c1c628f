"""``Renderer``: a diffusers SDXL pipeline, compatible requests from any caller rendered in one pipeline call. The
only Ray code of this stage.

A request with LoRAs carries its set as Serve's multiplexed model id (``RenderRequest.lora_set``): Serve routes it to
a replica that holds the set, splits batches by set, and evicts a replica's least recently used set beyond
``LORA_SETS_PER_REPLICA`` (Ray calls the entry's ``__del__``, which drops the adapters)."""

from __future__ import annotations

import asyncio
import functools
from types import SimpleNamespace

from ray import serve

from deployments.common.batching import ItemFailure
from deployments.common.deployment import ModelReplica
from deployments.common.errors import PortraitError
from deployments.common.stage import BatchConfig, Stage
from deployments.render.predictor import RendererOptions, RendererPredictor
from deployments.render.types import LORA_SETS_PER_REPLICA, RENDERER, Rendered, RenderRequest


@serve.deployment(name=RENDERER)
class Renderer(ModelReplica):
    stage = Stage(
        RENDERER,
        BatchConfig(max_batch_size=4, batch_wait_timeout_s=0.05),
        RendererOptions,
        RendererPredictor,
        batched=("render",),
    )

    @serve.multiplexed(max_num_models_per_replica=LORA_SETS_PER_REPLICA)
    async def lora_set(self, lora_set: str) -> SimpleNamespace:
        predictor = self._predictor
        await asyncio.to_thread(predictor.load_lora_set, lora_set)
        # an instance attribute, not a method: Ray calls it on eviction, the garbage collector never does
        return SimpleNamespace(__del__=functools.partial(predictor.unload_lora_set, lora_set))

    @serve.batch(**stage.batch.model_dump())
    async def render(self, items: list[RenderRequest]) -> list[Rendered | ItemFailure]:
        lora_set = serve.get_multiplexed_model_id()
        if lora_set:
            try:
                await self.lora_set(lora_set)
            except PortraitError:
                pass  # each item meets the same error in its render, typed, one outcome per item
        return await self.run_batch("render", items)
