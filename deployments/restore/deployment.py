"""``FaceRestorer`` (one deployment per restoration model, batched over aligned face crops from any request) and
``BackgroundUpscaler`` (Real-ESRGAN, batched over background tiles from any photo). The only Ray code of this job."""

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
from deployments.common.engine import EngineInfo
from deployments.common.settings import get_model_settings
from deployments.restore.params import restorer_deployment
from deployments.restore.restorer import RestorationPredictor, RestorerOptions
from deployments.restore.types import BackgroundEngine, FaceToRestore, RestoredFace, TileToUpscale, UpscaledTile
from deployments.restore.upscaler import UPSCALE_MODELS, UpscalePredictor, UpscalerOptions


@serve.deployment(name="FaceRestorer")
class FaceRestorer:
    def __init__(self, model_name: str) -> None:
        torch_threads(1)
        self._model_name = model_name
        self._store = get_model_settings().open_model_store()
        self._name = restorer_deployment(self._store.spec(model_name))
        self._predictor = RestorationPredictor(model_name, self._store)
        self._batch = BATCH_DEFAULTS["FaceRestorer"]

    def reconfigure(self, user_config: dict[str, Any]) -> None:
        """``user_config``: batch keys plus ``device``, ``autocast_dtype``, ``channels_last``."""
        self._batch, rest = apply_batch_config(self.restore, user_config, BATCH_DEFAULTS["FaceRestorer"])
        options = options_from(RestorerOptions, rest)
        if options != self._predictor.options:
            self._predictor = RestorationPredictor(self._model_name, self._store, options)

    @serve.batch(**batch_defaults("FaceRestorer"))
    async def restore(self, faces: list[FaceToRestore]) -> list[RestoredFace | ItemFailure]:
        """One outcome per crop: the restored face, or its own error (``deployments.common.batching``)."""
        record_batch(self._name, len(faces))
        predictor = self._predictor
        return await asyncio.to_thread(run_per_item, predictor.restore, faces, predictor.admit, self._name)

    async def engine_info(self) -> EngineInfo:
        """The engine this replica runs (the ingress picks the default model by it)."""
        return self._predictor.info

    def check_health(self) -> None:
        """Serve's periodic probe: weights loaded; on a GPU, a one-face forward pass must work."""
        self._predictor.probe()
        gpu_facts(self._name)

    async def health(self) -> dict[str, Any]:
        info = self._predictor.info
        return {
            "status": "ok" if info.neural else "degraded",
            "engine": info.engine,
            "model": self._model_name,
            "input_size_px": self._predictor.size_px,
            "models": [self._store.status(self._model_name).to_json()],
            "batch": self._batch.model_dump(),
            "options": dataclasses.asdict(self._predictor.options),
            **gpu_facts(self._name),
            **replica_facts(),
        }


@serve.deployment(name="BackgroundUpscaler")
class BackgroundUpscaler:
    def __init__(self) -> None:
        torch_threads(1)
        self._store = get_model_settings().open_model_store()
        self._predictor = UpscalePredictor(self._store)
        self._batch = BATCH_DEFAULTS["BackgroundUpscaler"]

    def reconfigure(self, user_config: dict[str, Any]) -> None:
        """``user_config``: batch keys plus ``device`` and ``max_input_megapixels``."""
        self._batch, rest = apply_batch_config(self.upscale, user_config, BATCH_DEFAULTS["BackgroundUpscaler"])
        options = options_from(UpscalerOptions, rest)
        if options != self._predictor.options:
            self._predictor = UpscalePredictor(self._store, options)

    @serve.batch(**batch_defaults("BackgroundUpscaler"))
    async def upscale(self, tiles: list[TileToUpscale]) -> list[UpscaledTile | ItemFailure]:
        """One outcome per tile: the upscaled tile, or its own error (``deployments.common.batching``)."""
        record_batch("BackgroundUpscaler", len(tiles))
        predictor = self._predictor
        return await asyncio.to_thread(run_per_item, predictor.upscale, tiles, predictor.admit, "BackgroundUpscaler")

    async def engine_for(self, scale: int) -> BackgroundEngine | None:
        """Which engine upscales by ``scale`` here, for photos up to which size (None: the job keeps Lanczos)."""
        return self._predictor.engine_for(scale)

    def check_health(self) -> None:
        self._predictor.probe()
        gpu_facts("BackgroundUpscaler")

    async def health(self) -> dict[str, Any]:
        engines = {scale: self._predictor.engine_for(scale) for scale in UPSCALE_MODELS}
        neural = all(info is not None for info in engines.values())
        names = dict.fromkeys(name for models in UPSCALE_MODELS.values() for name in models)
        return {
            "status": "ok" if neural else "degraded",
            "engine": "+".join(sorted({info.info.engine for info in engines.values() if info})) or "lanczos",
            "scales": {str(scale): info.info.to_json() if info else None for scale, info in engines.items()},
            "options": dataclasses.asdict(self._predictor.options),
            "models": [self._store.status(name).to_json() for name in names],
            "batch": self._batch.model_dump(),
            **gpu_facts("BackgroundUpscaler"),
            **replica_facts(),
        }
