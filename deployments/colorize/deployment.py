"""``Colorizer``: DDColor, batched over photos from any request (the job sends each photo's 512² network input, and
lays the predicted colours on the photo itself). The only Ray code of this job."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from ray import serve

from deployments.colorize.predictor import ColorizationPredictor, ColorizerOptions
from deployments.colorize.types import ColorizeJob, PredictedColor
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


@serve.deployment(name="Colorizer")
class Colorizer:
    def __init__(self) -> None:
        torch_threads(1)
        self._store = get_model_settings().open_model_store()
        self._predictor = ColorizationPredictor(self._store)
        self._batch = BATCH_DEFAULTS["Colorizer"]

    def reconfigure(self, user_config: dict[str, Any]) -> None:
        """``user_config``: batch keys plus ``device`` and ``autocast_dtype``."""
        self._batch, rest = apply_batch_config(self.colorize, user_config, BATCH_DEFAULTS["Colorizer"])
        options = options_from(ColorizerOptions, rest)
        if options != self._predictor.options:
            self._predictor = ColorizationPredictor(self._store, options)

    @serve.batch(**batch_defaults("Colorizer"))
    async def colorize(self, jobs: list[ColorizeJob]) -> list[PredictedColor | ItemFailure]:
        record_batch("Colorizer", len(jobs))
        return await asyncio.to_thread(run_per_item, self._predictor.predict, jobs, self._predictor.admit, "Colorizer")

    async def default_model(self) -> str:
        """The model a request without ``model`` gets (``ColorizationPredictor.default_model``)."""
        return self._predictor.default_model()

    def check_health(self) -> None:
        gpu_facts("Colorizer")

    async def health(self) -> dict[str, Any]:
        models = [self._store.status(name) for name in self._predictor.models]
        usable = [status.spec.name for status in models if status.usable]
        return {
            "status": "ok" if usable else "degraded",
            "engine": "ddcolor" if usable else "none",
            "models": [status.to_json() for status in models],
            "options": dataclasses.asdict(self._predictor.options),
            "batch": self._batch.model_dump(),
            **gpu_facts("Colorizer"),
            **replica_facts(),
        }
