"""``PortraitMatter``: selfie segmentation on CPU replicas, batched over photos. The only Ray code of this job.

It returns the coarse 256x256 matte with its affine (a few hundred KB); refinement happens at the small output
resolution in the ID-photo pipeline, so full-resolution mattes never cross the object store.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
from ray import serve

from deployments.common.deployment import (
    BATCH_DEFAULTS,
    apply_batch_config,
    batch_defaults,
    limit_cpu_threads,
    record_batch,
    replica_facts,
)
from deployments.common.errors import InvalidParameter
from deployments.common.settings import get_model_settings
from deployments.idphoto.matte import MATTE_MODEL, LowResMatte
from deployments.idphoto.matte import PortraitMatter as PortraitMatterEngine

PROBE_IMAGE = np.full((64, 64, 3), 128, np.uint8)


@serve.deployment(name="PortraitMatter")
class PortraitMatter:
    def __init__(self) -> None:
        limit_cpu_threads(1)
        store = get_model_settings().open_model_store()
        self._status = store.status(MATTE_MODEL)
        self._engine = PortraitMatterEngine(store.resolve(MATTE_MODEL).parent, num_threads=1)
        self._batch = BATCH_DEFAULTS["PortraitMatter"]

    def reconfigure(self, user_config: dict[str, Any]) -> None:
        self._batch, extra = apply_batch_config(self.segment, user_config, BATCH_DEFAULTS["PortraitMatter"])
        if extra:
            raise InvalidParameter(
                f"unknown user_config keys {sorted(extra)}; allowed: max_batch_size, batch_wait_timeout_s"
            )

    @serve.batch(**batch_defaults("PortraitMatter"))
    async def segment(self, images: list[np.ndarray]) -> list[LowResMatte]:
        record_batch("PortraitMatter", len(images))
        return await asyncio.to_thread(self._engine.segment_batch, images)

    def check_health(self) -> None:
        """Serve's periodic probe: the segmentation interpreter answers."""
        self._engine.segment(PROBE_IMAGE)

    async def health(self) -> dict[str, Any]:
        return {
            "status": "ok",
            "engine": self._status.spec.engine,
            "models": [self._status.to_json()],
            "batch": self._batch.model_dump(),
            **replica_facts(),
        }
