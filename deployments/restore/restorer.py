"""The restoration predictor a ``FaceRestorer`` replica holds: one model's network when its weights are in the store,
else the classic restorer.

Which network family a model is, and how its official inference treats it, is the ``RESTORER`` of the module the
manifest entry's ``architecture`` names (``architecture.py``); its crop size and alignment template are the entry's
``args``. Crops follow the image contract (HxWx3 uint8 RGB), aligned with that template; results come back at the
model's own size (the caller scales its paste-back matrix accordingly).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np
from torch import nn

from deployments.common.admission import FACE_CROP_INPUT
from deployments.common.engine import EngineInfo
from deployments.common.image import require_image
from deployments.common.torch_device import TorchOptions, pick_device, to_memory_format
from deployments.common.weights import ModelStore
from deployments.restore.architecture import restorer_architecture
from deployments.restore.classic import restore_face_classic
from deployments.restore.gray import match_gray
from deployments.restore.inference import restore_batch
from deployments.restore.types import FaceToRestore, RestoredFace

logger = logging.getLogger(__name__)

CLASSIC = EngineInfo(engine="classic-restore", neural=False, weights=None)


@dataclass(frozen=True)
class RestorerOptions(TorchOptions):
    """``device`` and ``autocast_dtype`` (``TorchOptions``); ``channels_last`` applies on CUDA only."""

    channels_last: bool = False


class RestorationPredictor:
    """Loads once; ``restore`` runs one forward pass for a whole batch of crops."""

    def __init__(self, store: ModelStore, options: RestorerOptions, model_name: str) -> None:
        """The arguments of a stage's predictor factory: the store, the options, the binding's model."""
        spec = store.spec(model_name)
        self._store = store
        self._architecture = restorer_architecture(spec)
        self.model_name = model_name
        self.options = options
        self.device = pick_device(options.device)
        self.size_px = int(spec.args["size"])
        path = store.find(model_name)
        if path is None:
            logger.warning("%s weights are absent: serving the classic (non-neural) restorer", model_name)
            self._model: nn.Module | None = None
            self.info = CLASSIC
            return
        model = self._architecture.load(path).to(self.device)
        if options.channels_last and self.device.type == "cuda":
            model = to_memory_format(model)
        self._model = model
        self.info = EngineInfo.from_weights(store.status(model_name))

    def probe(self) -> None:
        """Health probe: a one-face forward pass on a GPU (milliseconds there); on a CPU it would cost seconds, so
        there the loaded weights are the check."""
        if self._model is not None and self.device.type == "cuda":
            self.restore([FaceToRestore(np.zeros((self.size_px, self.size_px, 3), np.uint8))])

    def engine_info(self) -> EngineInfo:
        """The engine this predictor runs (a job without ``model`` picks the first neural restorer by it)."""
        return self.info

    def health(self) -> dict[str, Any]:
        return {
            "status": "ok" if self.info.neural else "degraded",
            "engine": self.info.engine,
            "model": self.model_name,
            "input_size_px": self.size_px,
            "models": [self._store.status(self.model_name).to_json()],
        }

    def admit(self, face: FaceToRestore) -> None:
        """Refuse a crop this stage must not run (``admission``): not the image contract, or over the crop cap."""
        require_image(face.crop, what="face crop")
        FACE_CROP_INPUT.admit_image(face.crop)

    def restore(self, faces: list[FaceToRestore]) -> list[RestoredFace]:
        if self._model is None:
            return [RestoredFace(restore_face_classic(face.crop), self.info) for face in faces]
        restored = restore_batch(
            self._model,
            [face.crop for face in faces],
            size_px=self.size_px,
            fidelities=[face.fidelity for face in faces] if self._architecture.takes_fidelity else None,
            round_output=self._architecture.round_output,
            device=self.device,
            autocast_dtype=self.options.autocast_dtype,
            channels_last=self.options.channels_last and self.device.type == "cuda",
        )
        if self._architecture.keeps_gray:
            restored = [keep_gray(face, out) for face, out in zip(faces, restored)]
        return [RestoredFace(face, self.info) for face in restored]


def keep_gray(face: FaceToRestore, restored_rgb: np.ndarray) -> np.ndarray:
    """``restored_rgb`` gray and matched to the input crop (at the restored size) when the photo was gray."""
    if not face.from_gray_photo:
        return restored_rgb
    size = restored_rgb.shape[1], restored_rgb.shape[0]
    crop = face.crop if face.crop.shape[:2] == restored_rgb.shape[:2] else cv2.resize(face.crop, size)
    return match_gray(restored_rgb, crop)
