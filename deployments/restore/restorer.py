"""The restoration engine a ``FaceRestorer`` replica holds: GPEN when its weights are in the store, else classic.

Crops follow the image contract (HxWx3 uint8 RGB), aligned with the GPEN template; results come back at the model's
own size (the caller scales its paste-back matrix accordingly).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import torch

from deployments.common.engine import EngineInfo
from deployments.common.errors import InvalidParameter
from deployments.common.torch_device import pick_device
from deployments.common.weights import ModelStore
from deployments.restore.classic import restore_face_classic
from deployments.restore.engine import restore_with_gpen
from deployments.restore.gpen import load_gpen
from deployments.restore.types import RestoredFace

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RestorerOptions:
    """``device``: ``auto`` picks CUDA when present. ``autocast_dtype``/``channels_last`` apply on CUDA only."""

    device: str = "auto"
    autocast_dtype: str | None = None
    channels_last: bool = False

    def __post_init__(self) -> None:
        if self.autocast_dtype not in (None, "bfloat16", "float16"):
            raise InvalidParameter(f"autocast_dtype must be bfloat16, float16 or null, got {self.autocast_dtype!r}")


class FaceRestorerEngine:
    """Loads once; ``restore`` runs one forward pass for a whole batch of crops."""

    def __init__(self, model_name: str, store: ModelStore, options: RestorerOptions = RestorerOptions()) -> None:
        self.model_name = model_name
        self.options = options
        self.device = pick_device(options.device)
        path = store.find(model_name)
        if path is None:
            logger.warning("%s weights are absent: serving the classic (non-neural) restorer", model_name)
            self._model = None
            self.info = EngineInfo(engine="classic-restore", neural=False, weights=None)
            self.size_px = int(store.spec(model_name).args.get("size", 512))
            return
        model = load_gpen(path, map_location="cpu").to(self.device)
        if options.channels_last and self.device.type == "cuda":
            model = model.to(memory_format=torch.channels_last)
        self._model = model
        self.size_px = model.config.size
        self.info = EngineInfo.from_weights(store.status(model_name))

    def probe(self) -> None:
        """Health probe: a one-face forward pass on a GPU (milliseconds there); on a CPU it would cost seconds, so
        there the loaded weights are the check."""
        if self._model is not None and self.device.type == "cuda":
            self.restore([np.zeros((self.size_px, self.size_px, 3), np.uint8)])

    def restore(self, crops: list[np.ndarray]) -> list[RestoredFace]:
        if self._model is None:
            return [RestoredFace(restore_face_classic(crop), self.info) for crop in crops]
        restored = restore_with_gpen(
            self._model,
            crops,
            device=self.device,
            autocast_dtype=self.options.autocast_dtype,
            channels_last=self.options.channels_last and self.device.type == "cuda",
        )
        return [RestoredFace(face, self.info) for face in restored]
