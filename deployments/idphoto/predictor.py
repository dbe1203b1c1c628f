"""The matting predictor a ``PortraitMatter`` replica holds: MODNet (default) and the selfie model, batched.

A batch may mix modes and photo sizes. Selfie requests run one by one (the interpreter takes one image); MODNet
requests are grouped by their input size (photos of one aspect ratio share it) and each group is one forward pass.
Groups are never padded to a common size: MODNet's InstanceNorm would see the padding and change the matte. On a
CPU a group runs image by image: there a batched pass costs more per image than single ones (measured 1.35-1.4x at
batch 4, the activations outgrow the caches), so only a GPU gets whole groups.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from deployments.common.admission import MIN_PHOTO_SIDE_PX, PHOTO_STAGE_INPUT
from deployments.common.errors import InternalError
from deployments.common.image import PROBE_IMAGE, require_image
from deployments.common.torch_device import TorchOptions, autocast, autocast_dtype, pick_device
from deployments.common.weights import ModelStatus, ModelStore
from deployments.idphoto.matte import (
    DEFAULT_MATTING,
    MATTE_MODELS,
    MATTING_MODES,
    LowResMatte,
    Matting,
    PhotoToMatte,
    SelfieSegmenter,
)
from deployments.idphoto.modnet import ModNetInput, load_modnet, prepare_input

logger = logging.getLogger(__name__)

IDENTITY = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])


@dataclass(frozen=True)
class MatterOptions(TorchOptions):
    """``device`` and ``autocast_dtype`` (``TorchOptions``)."""


class MattingPredictor:
    """Loads both models once; no per-request state, so concurrent calls from worker threads are safe."""

    def __init__(
        self,
        selfie_path: Path | str,
        modnet_path: Path | str,
        options: MatterOptions = MatterOptions(),
        *,
        num_threads: int = 1,
        models: Mapping[Matting, ModelStatus] | None = None,
    ) -> None:
        self.options = options
        self.models = dict(models or {})
        self.device = pick_device(options.device)
        self.selfie = SelfieSegmenter(selfie_path, num_threads=num_threads)
        # Channels-last: depthwise and small convolutions run several times faster on CPU (oneDNN), and on GPU.
        self.modnet = load_modnet(modnet_path).to(self.device, memory_format=torch.channels_last)
        self._amp_dtype = autocast_dtype(options.autocast_dtype, self.device)

    @classmethod
    def from_store(
        cls, store: ModelStore, options: MatterOptions = MatterOptions(), *, num_threads: int = 1
    ) -> MattingPredictor:
        """Both built-in models from the store (``ModelUnavailable`` naming the fix when one is absent)."""
        selfie, modnet = (store.resolve(MATTE_MODELS[mode]) for mode in ("selfie", "modnet"))
        statuses = {mode: store.status(name) for mode, name in MATTE_MODELS.items()}
        return cls(selfie, modnet, options, num_threads=num_threads, models=statuses)

    def health(self) -> dict[str, Any]:
        engines = {mode: status.spec.engine for mode, status in self.models.items()}
        return {
            "status": "ok",
            "engine": engines.get("modnet", "modnet"),
            "engines": engines,
            "models": [status.to_json() for status in self.models.values()],
        }

    def segment(self, rgb: np.ndarray, matting: Matting = DEFAULT_MATTING) -> LowResMatte:
        """The model's matte of one whole photo (image contract: HxWx3 uint8 RGB)."""
        return self.segment_batch([PhotoToMatte(rgb, matting)])[0]

    def admit(self, request: PhotoToMatte) -> None:
        """Refuse a request this stage must not run (``admission``): not the image contract, under 8 px a side, over
        the whole-photo cap, or a mode the params never allow (our bug)."""
        require_image(request.image, what="matting input", min_side_px=MIN_PHOTO_SIDE_PX)
        PHOTO_STAGE_INPUT.admit_image(request.image)
        if request.matting not in MATTING_MODES:
            raise InternalError(f"matting mode {request.matting!r} reached the matter; params allow modnet, selfie")

    def segment_batch(self, requests: Sequence[PhotoToMatte]) -> list[LowResMatte]:
        """One matte per request, in order; MODNet requests of one input size share a forward pass."""
        results: dict[int, LowResMatte] = {}
        groups: dict[tuple[int, int], list[tuple[int, ModNetInput]]] = {}
        for index, request in enumerate(requests):
            self.admit(request)
            if request.matting == "selfie":
                results[index] = self.selfie.segment(request.image)
            else:
                prepared = prepare_input(request.image)
                groups.setdefault(prepared.size_hw, []).append((index, prepared))
        for items in groups.values():
            step = len(items) if self.device.type == "cuda" else 1
            for start in range(0, len(items), step):
                chunk = items[start : start + step]
                alphas = self._run_modnet([prepared.tensor for _, prepared in chunk])
                for (index, prepared), alpha in zip(chunk, alphas):
                    results[index] = LowResMatte(alpha, prepared.affine, prepared.source_shape, "modnet")
        return [results[index] for index in range(len(requests))]

    def matte(self, rgb: np.ndarray, matting: Matting = DEFAULT_MATTING) -> np.ndarray:
        """Final float32 ``(H, W)`` matte in [0, 1] at the photo's own resolution."""
        height, width = rgb.shape[:2]
        return self.segment(rgb, matting).matte_at(IDENTITY, (width, height), rgb)

    def probe(self) -> None:
        """Health probe: the selfie interpreter answers; on a GPU MODNet runs too (milliseconds there; on a CPU a
        512 px forward pass would cost a large share of the replica every probe, so there the loaded weights are the
        check)."""
        self.selfie.segment(PROBE_IMAGE)
        if self.device.type == "cuda":
            self.segment(PROBE_IMAGE, "modnet")

    def _run_modnet(self, tensors: list[np.ndarray]) -> list[np.ndarray]:
        batch = torch.from_numpy(np.stack(tensors)).to(self.device).contiguous(memory_format=torch.channels_last)
        with torch.inference_mode(), autocast(self._amp_dtype):
            matte = self.modnet(batch)
        alphas = matte[:, 0].float().cpu().numpy()
        return [np.ascontiguousarray(alpha) for alpha in alphas]
