"""Records that cross from the restorer replicas to the ingress (torch-free: the ingress unpickles them)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from deployments.common.engine import EngineInfo
from deployments.common.stage import StageCall


@dataclass(frozen=True, eq=False)
class RestoredFace:
    """One restored crop (HxWx3 uint8 RGB at the model's size) and the engine that produced it."""

    crop: np.ndarray
    engine: EngineInfo


@dataclass(frozen=True, eq=False)
class FaceToRestore:
    """One aligned crop (HxWx3 uint8 RGB at the restorer's template size), the fidelity CodeFormer would use, and
    whether the photo it comes from is gray (``gray.is_gray``: CodeFormer then returns the face gray)."""

    crop: np.ndarray
    fidelity: float = 0.5
    from_gray_photo: bool = False


@dataclass(frozen=True, eq=False)
class TileToUpscale:
    """One background tile (``tiles.Tile.pixels``: HxWx3 uint8 RGB, all tiles of a photo one shape) and the factor."""

    pixels: np.ndarray
    scale: int


@dataclass(frozen=True)
class BackgroundEngine:
    """What upscales backgrounds by one factor, and the largest photo it takes (None: any); a bigger photo keeps
    Lanczos (on a CPU, Real-ESRGAN needs minutes per megapixel)."""

    info: EngineInfo
    max_input_pixels: int | None = None

    def takes(self, width_px: int, height_px: int) -> bool:
        return self.max_input_pixels is None or width_px * height_px <= self.max_input_pixels


@dataclass(frozen=True, eq=False)
class UpscaledTile:
    """The tile ``scale`` times larger and the engine that made it."""

    pixels: np.ndarray
    engine: EngineInfo


FACE_RESTORER = "FaceRestorer"  # the class; each model's deployment is named in the manifest (``RESTORE_FACE.at``)
BACKGROUND_UPSCALER = "BackgroundUpscaler"
RESTORE_FACE: StageCall[FaceToRestore, RestoredFace] = StageCall(FACE_RESTORER, "restore")
# The engine a restorer runs (the classic one without its weights); a job without ``model`` picks by it.
RESTORER_ENGINE: StageCall[None, EngineInfo] = StageCall(FACE_RESTORER, "engine_info", batched=False)
UPSCALE_TILE: StageCall[TileToUpscale, UpscaledTile] = StageCall(BACKGROUND_UPSCALER, "upscale")
# Which engine upscales by a factor here (None: the job keeps Lanczos).
BACKGROUND_ENGINE: StageCall[int, BackgroundEngine | None] = StageCall(BACKGROUND_UPSCALER, "engine_for", batched=False)
