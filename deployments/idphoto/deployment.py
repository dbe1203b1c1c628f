"""``PortraitMatter``: MODNet (default) and selfie matting, batched over photos from any request. The only Ray code
of this job.

It returns each model's matte on its own small canvas with the affine back to the photo (MODNet: about 512x680
float32, ~1.4 MB; selfie: 256x256); refinement and compositing happen at the small output resolution in the ID-photo
pipeline, so full-resolution mattes never cross the object store. ``user_config``: the batch keys plus ``device``
and ``autocast_dtype`` (``bfloat16`` on a GPU).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from ray import serve

from deployments.common.batching import ItemFailure, run_per_item
from deployments.common.deployment import (
    BATCH_DEFAULTS,
    apply_batch_config,
    batch_defaults,
    gpu_facts,
    options_from,
    record_batch,
    replica_facts,
    torch_threads,
)
from deployments.common.settings import get_model_settings
from deployments.idphoto.matte import MATTE_MODELS, LowResMatte, MatteRequest
from deployments.idphoto.predictor import MatterOptions, MattingPredictor


@serve.deployment(name="PortraitMatter")
class PortraitMatter:
    def __init__(self) -> None:
        torch_threads(1)
        self._store = get_model_settings().open_model_store()
        self._predictor = MattingPredictor.from_store(self._store)
        self._batch = BATCH_DEFAULTS["PortraitMatter"]

    def reconfigure(self, user_config: dict[str, Any]) -> None:
        self._batch, rest = apply_batch_config(self.segment, user_config, BATCH_DEFAULTS["PortraitMatter"])
        options = options_from(MatterOptions, rest)
        if options != self._predictor.options:
            self._predictor = MattingPredictor.from_store(self._store, options)

    @serve.batch(**batch_defaults("PortraitMatter"))
    async def segment(self, requests: list[MatteRequest]) -> list[LowResMatte | ItemFailure]:
        """One outcome per request: its matte, or its own error (``deployments.common.batching``)."""
        record_batch("PortraitMatter", len(requests))
        predictor = self._predictor
        return await asyncio.to_thread(
            run_per_item, predictor.segment_batch, requests, predictor.admit, "PortraitMatter"
        )

    def check_health(self) -> None:
        """Serve's periodic probe: the selfie interpreter answers; on a GPU, a MODNet forward pass too."""
        self._predictor.probe()
        gpu_facts("PortraitMatter")

    async def health(self) -> dict[str, Any]:
        statuses = {mode: self._store.status(name) for mode, name in MATTE_MODELS.items()}
        return {
            "status": "ok",
            "engine": statuses["modnet"].spec.engine,
            "engines": {mode: status.spec.engine for mode, status in statuses.items()},
            "models": [status.to_json() for status in statuses.values()],
            "batch": self._batch.model_dump(),
            "options": dataclasses.asdict(self._predictor.options),
            **gpu_facts("PortraitMatter"),
            **replica_facts(),
        }
