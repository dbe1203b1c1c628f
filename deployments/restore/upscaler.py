"""The predictor a ``BackgroundUpscaler`` replica holds: Real-ESRGAN x2plus / x4plus for the photo around the faces.

Tiles arrive from many photos (``tiles.split_tiles``: one shape per photo, HxWx3 uint8 RGB) and go through the
network in groups of equal factor and shape. A factor whose own model is absent runs on x4plus and is brought down
with an area resize (x2 from x4, as a user without x2plus would do by hand); with neither model the replica reports
no engine and the job keeps its Lanczos path. The built-in ``realesrgan-x4plus-ncnn`` (x4plus converted from the
authors' ncnn export, fp16-rounded weights) comes last: an official fp32 ``.pth``, when pulled, wins.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np
import torch

from deployments.common.admission import UPSCALE_TILE_INPUT
from deployments.common.engine import EngineInfo
from deployments.common.errors import InternalError, InvalidParameter
from deployments.common.image import require_image
from deployments.common.torch_device import pick_device
from deployments.common.weights import ModelStore
from deployments.restore.realesrgan import RrdbNet, load_realesrgan, output_to_rgb, rgb_to_input
from deployments.restore.types import BackgroundEngine, TileToUpscale, UpscaledTile

logger = logging.getLogger(__name__)

# The manifest entries by factor, best first for that factor.
UPSCALE_MODELS = {
    2: ("realesrgan-x2plus", "realesrgan-x4plus", "realesrgan-x4plus-ncnn"),
    4: ("realesrgan-x4plus", "realesrgan-x4plus-ncnn"),
}


@dataclass(frozen=True)
class UpscalerOptions:
    """The ``BackgroundUpscaler``'s ``user_config`` keys besides batching. ``max_input_megapixels``: photos above it
    keep Lanczos (set it on CPU replicas, where a 12 MP photo would take hours)."""

    device: str = "auto"
    max_input_megapixels: float | None = None

    def __post_init__(self) -> None:
        if self.max_input_megapixels is not None and self.max_input_megapixels <= 0:
            raise InvalidParameter(f"max_input_megapixels must be positive, got {self.max_input_megapixels}")


class UpscalePredictor:
    def __init__(self, store: ModelStore, options: UpscalerOptions = UpscalerOptions()) -> None:
        self.options = options
        self._store = store
        self.device = pick_device(options.device)
        limit = options.max_input_megapixels
        self._max_input_pixels = None if limit is None else int(limit * 1_000_000)
        self._models: dict[str, tuple[RrdbNet, EngineInfo]] = {}
        for scale, names in UPSCALE_MODELS.items():
            present = [name for name in names if name in self._models or store.find(name) is not None]
            if not present:
                logger.warning("no Real-ESRGAN weights for x%d (any of %s)", scale, ", ".join(names))
            elif present[0] not in self._models:  # only each factor's best: a lesser copy would only take memory
                model = load_realesrgan(store.resolve(present[0])).to(self.device)
                self._models[present[0]] = (model, EngineInfo.from_weights(store.status(present[0])))

    def engine_for(self, scale: int) -> BackgroundEngine | None:
        """The engine that upscales by ``scale`` and the largest photo it takes, or None (the job keeps Lanczos)."""
        chosen = self._model_for(scale)
        return BackgroundEngine(chosen[1], self._max_input_pixels) if chosen else None

    def probe(self) -> None:
        """Health probe on a GPU: one small tile per loaded model."""
        if self.device.type == "cuda":
            for model, _ in self._models.values():
                with torch.inference_mode():
                    model(torch.zeros(1, 3, 32, 32, device=self.device))

    def health(self) -> dict[str, Any]:
        engines = {scale: self.engine_for(scale) for scale in UPSCALE_MODELS}
        neural = all(info is not None for info in engines.values())
        names = dict.fromkeys(name for models in UPSCALE_MODELS.values() for name in models)
        return {
            "status": "ok" if neural else "degraded",
            "engine": "+".join(sorted({info.info.engine for info in engines.values() if info})) or "lanczos",
            "scales": {str(scale): info.info.to_json() if info else None for scale, info in engines.items()},
            "models": [self._store.status(name).to_json() for name in names],
        }

    def admit(self, tile: TileToUpscale) -> None:
        """Refuse a tile this stage must not run (``admission``): not the image contract, over the tile cap (a whole
        photo never reaches the network), or a factor this replica has no model for (our bug: the job asked first)."""
        require_image(tile.pixels, what="tile")
        UPSCALE_TILE_INPUT.admit_image(tile.pixels)
        self._chosen(tile.scale)

    def upscale(self, tiles: list[TileToUpscale]) -> list[UpscaledTile]:
        """One forward pass per group of tiles of equal factor and shape; results in the order of ``tiles``."""
        groups: dict[tuple[int, tuple[int, ...]], list[int]] = defaultdict(list)
        for index, tile in enumerate(tiles):
            groups[(tile.scale, tile.pixels.shape)].append(index)
        results: dict[int, UpscaledTile] = {}
        for (scale, _), indices in groups.items():
            model, info = self._chosen(scale)
            with torch.inference_mode():
                batch = rgb_to_input(np.stack([tiles[i].pixels for i in indices]), device=self.device)
                upscaled = output_to_rgb(model(batch))
            for index, pixels in zip(indices, upscaled, strict=True):
                if model.scale != scale:
                    height, width = tiles[index].pixels.shape[:2]
                    pixels = cv2.resize(pixels, (width * scale, height * scale), interpolation=cv2.INTER_AREA)
                results[index] = UpscaledTile(pixels=np.ascontiguousarray(pixels), engine=info)
        return [results[index] for index in range(len(tiles))]

    def _chosen(self, scale: int) -> tuple[RrdbNet, EngineInfo]:
        chosen = self._model_for(scale)
        if chosen is None:
            raise InternalError(f"tiles for x{scale} reached a replica without a Real-ESRGAN model for it")
        return chosen

    def _model_for(self, scale: int) -> tuple[RrdbNet, EngineInfo] | None:
        for name in UPSCALE_MODELS.get(scale, ()):
            if name in self._models:
                return self._models[name]
        return None
