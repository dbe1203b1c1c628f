"""``CartoonHead`` and ``CartoonBackground``: one class, bound twice (288 head crops / whole images), batched over
items from any request; a batch may mix styles and sizes (the predictor groups them)."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
from ray import serve

from deployments.cartoon.predictor import CartoonPredictor
from deployments.cartoon.styles import cartoon_styles
from deployments.cartoon.types import CARTOON_DEPLOYMENTS, ModelKind, StyleJob, Stylized
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
from deployments.common.torch_device import DeviceOptions

PROBE_IMAGE = np.full((16, 16, 3), 128, np.uint8)


@serve.deployment(name="Cartoonizer")
class Cartoonizer:
    def __init__(self, kind: ModelKind) -> None:
        import torch  # here, not at module level: Serve pickles this class with the module's globals

        torch_threads(1)
        # This replica's process runs only DCT-Net, so the switch is ours to set: TF32 convolutions drift from the
        # official float32 graphs, and exactness is the point of the port.
        torch.backends.cudnn.allow_tf32 = False
        self._kind = kind
        self._name = CARTOON_DEPLOYMENTS[kind]
        self._store = get_model_settings().open_model_store()
        self._styles = cartoon_styles(self._store.manifest)
        self._predictor = CartoonPredictor(kind, self._styles, self._store)
        self._batch = BATCH_DEFAULTS["Cartoonizer"]
        self._device = DeviceOptions()

    def reconfigure(self, user_config: dict[str, Any]) -> None:
        """``user_config``: batch keys plus ``device``."""
        self._batch, rest = apply_batch_config(self.stylize, user_config, BATCH_DEFAULTS["Cartoonizer"])
        device = options_from(DeviceOptions, rest)
        if device != self._device:
            self._device = device
            self._predictor = CartoonPredictor(self._kind, self._styles, self._store, device.device)

    @serve.batch(**batch_defaults("Cartoonizer"))
    async def stylize(self, jobs: list[StyleJob]) -> list[Stylized | ItemFailure]:
        """One outcome per job: the stylized image, or its own error (``deployments.common.batching``)."""
        record_batch(self._name, len(jobs))
        predictor = self._predictor
        return await asyncio.to_thread(run_per_item, predictor.stylize, jobs, predictor.admit, self._name)

    def check_health(self) -> None:
        """Serve's periodic probe: every loaded style runs a 16x16 forward pass."""
        self._predictor.stylize([StyleJob(style, PROBE_IMAGE) for style in self._predictor.styles])
        gpu_facts(self._name)

    async def health(self) -> dict[str, Any]:
        engines = {style: self._predictor.engine_for(style).to_json() for style in self._predictor.styles}
        neural = any(info["neural"] for info in engines.values())
        models = [
            self._store.status(name).to_json()
            for style in self._styles.values()
            for name in ([style.head_model] if self._kind == "head" else [style.background_model])
            if name
        ]
        return {
            "status": "ok" if neural else "degraded",
            "kind": self._kind,
            "engine": "dctnet" if neural else ("classic-cartoon" if self._kind == "background" else "none"),
            "styles": engines,
            "models": models,
            "batch": self._batch.model_dump(),
            **gpu_facts(self._name),
            **replica_facts(),
        }
