"""The restore job's pure steps, below the edge: which faces to restore, the tiled background upscale, and the paste
back. No Ray: ``serve_app/jobs/restore.py`` orchestrates them around the deployments' calls.

Images follow the package contract (HxWx3 uint8 RGB); face matrices map original pixels to crop pixels.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

import numpy as np

from deployments.faces.align import AlignedFace, rescale_crop_matrix
from deployments.faces.paste import paste_back
from deployments.faces.types import Face
from deployments.restore.params import RestoreParams
from deployments.restore.tiles import paste_tile, realesrgan_multiple_px, split_tiles
from deployments.restore.types import RestoredFace, TileToUpscale, UpscaledTile

# Real-ESRGAN tiles as GFPGAN's inference cuts them (bg_tile 400, tile_pad 10), and how many one photo has in flight.
BG_TILE_PX = 400
BG_OVERLAP_PX = 10
BG_TILES_IN_FLIGHT = 16

UpscaleTile = Callable[[TileToUpscale], Awaitable[UpscaledTile]]


def select_faces(faces: Sequence[Face], width: int, height: int, params: RestoreParams) -> list[Face]:
    """The faces to restore: the one nearest the centre, or the ``max_faces`` largest (faces arrive largest first)."""
    if params.only_center_face and faces:
        return [min(faces, key=lambda face: _distance_to_centre(face, width, height))]
    return list(faces[: params.max_faces])


def _distance_to_centre(face: Face, width: int, height: int) -> float:
    x1, y1, x2, y2 = face.box
    return float(np.hypot((x1 + x2 - width) / 2.0, (y1 + y2 - height) / 2.0))


def composite(
    base: np.ndarray,
    aligned: Sequence[AlignedFace],
    restored: Sequence[RestoredFace],
    params: RestoreParams,
    opacities: Sequence[float] | None = None,
) -> np.ndarray:
    """Paste the restored faces onto ``base``, the photo already upscaled by ``params.upscale`` (``opacities``: one
    per face, for faces fading in or out of a video)."""
    pasted = [
        (done.crop, rescale_crop_matrix(face.matrix, face.crop.shape[0], done.crop.shape[0]))
        for face, done in zip(aligned, restored)
    ]
    return paste_back(base, pasted, blend=params.blend, upscale=params.upscale, opacities=opacities)


async def upscale_tiled(rgb: np.ndarray, scale: int, upscale_tile: UpscaleTile) -> np.ndarray:
    """The photo ``scale`` times larger, tile by tile through ``upscale_tile`` (a batched deployment's call, so tiles
    of many photos share its batches), a bounded number of tiles in flight (a 12 MP photo is ~100 tiles)."""
    multiple_px = realesrgan_multiple_px(scale)
    # A photo smaller than a tile is one tile of its own size (rounded up to the multiple), not padded to a full one:
    # on a CPU, a 420 px window costs minutes whatever part of it is the photo.
    tile_px = min(BG_TILE_PX, -(-max(rgb.shape[:2]) // multiple_px) * multiple_px)
    tiles = await asyncio.to_thread(
        split_tiles, rgb, tile_px=tile_px, overlap_px=BG_OVERLAP_PX, multiple_px=multiple_px
    )
    out = np.empty((rgb.shape[0] * scale, rgb.shape[1] * scale, 3), np.uint8)
    for start in range(0, len(tiles), BG_TILES_IN_FLIGHT):
        chunk = tiles[start : start + BG_TILES_IN_FLIGHT]
        done = await asyncio.gather(*(upscale_tile(TileToUpscale(tile.pixels, scale)) for tile in chunk))
        for tile, upscaled in zip(chunk, done):
            paste_tile(out, tile, upscaled.pixels, scale)
    return out
