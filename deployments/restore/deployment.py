"""``FaceRestorer``: one deployment per restoration model, batched over aligned face crops from any request."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import numpy as np
from ray import serve

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
from deployments.restore.restorer import FaceRestorerEngine, RestorerOptions
from deployments.restore.types import RestoredFace


@serve.deployment(name="FaceRestorer")
class FaceRestorer:
    def __init__(self, model_name: str) -> None:
        torch_threads(1)
        self._model_name = model_name
        self._store = get_model_settings().open_model_store()
        self._engine = FaceRestorerEngine(model_name, self._store)
        self._batch = BATCH_DEFAULTS["FaceRestorer"]

    def reconfigure(self, user_config: dict[str, Any]) -> None:
        """``user_config``: batch keys plus ``device``, ``autocast_dtype``, ``channels_last``."""
        self._batch, rest = apply_batch_config(self.restore, user_config, BATCH_DEFAULTS["FaceRestorer"])
        options = options_from(RestorerOptions, rest)
        if options != self._engine.options:
            self._engine = FaceRestorerEngine(self._model_name, self._store, options)

    @serve.batch(**batch_defaults("FaceRestorer"))
    async def restore(self, crops: list[np.ndarray]) -> list[RestoredFace]:
        record_batch(f"FaceRestorer[{self._model_name}]", len(crops))
        return await asyncio.to_thread(self._engine.restore, crops)

    def check_health(self) -> None:
        """Serve's periodic probe: weights loaded; on a GPU, a one-face forward pass must work."""
        self._engine.probe()
        gpu_facts(f"FaceRestorer[{self._model_name}]")

    async def health(self) -> dict[str, Any]:
        info = self._engine.info
        return {
            "status": "ok" if info.neural else "degraded",
            "engine": info.engine,
            "model": self._model_name,
            "input_size_px": self._engine.size_px,
            "models": [self._store.status(self._model_name).to_json()],
            "batch": self._batch.model_dump(),
            "options": dataclasses.asdict(self._engine.options),
            **gpu_facts(f"FaceRestorer[{self._model_name}]"),
            **replica_facts(),
        }
