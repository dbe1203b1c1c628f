"""Face restoration of a whole photo: detect → align each face → restore (batched across requests) → paste back."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from deployments.common.engine import EngineInfo
from deployments.common.image import DecodedImage
from deployments.common.params import parse_params
from deployments.common.upscale import upscale_image
from deployments.faces.align import AlignedFace, align_face, rescale_crop_matrix
from deployments.faces.paste import paste_back
from deployments.faces.types import Face
from deployments.restore.params import RestoreParams
from deployments.restore.tiles import paste_tile, realesrgan_multiple_px, split_tiles
from deployments.restore.types import FaceToRestore, RestoredFace, TileToUpscale
from serve_app.backend import Backend
from serve_app.jobs.context import JobContext, Timings, decode_upload
from serve_app.jobs.results import JobResult, encode_job_result, png_b64

# Real-ESRGAN tiles as GFPGAN's inference cuts them (bg_tile 400, tile_pad 10), and how many one photo has in flight.
BG_TILE_PX = 400
BG_OVERLAP_PX = 10
BG_TILES_IN_FLIGHT = 16


def parse_restore_params(fields: Mapping[str, Any], context: JobContext) -> RestoreParams:
    return parse_params(RestoreParams, fields)


def select_faces(faces: Sequence[Face], width: int, height: int, params: RestoreParams) -> list[Face]:
    """The faces to restore: the one nearest the centre, or the ``max_faces`` largest (faces arrive largest first)."""
    if params.only_center_face and faces:
        return [min(faces, key=lambda face: _distance_to_centre(face, width, height))]
    return list(faces[: params.max_faces])


def _distance_to_centre(face: Face, width: int, height: int) -> float:
    x1, y1, x2, y2 = face.box
    return float(np.hypot((x1 + x2 - width) / 2.0, (y1 + y2 - height) / 2.0))


def align_all(rgb: np.ndarray, faces: Sequence[Face], template: str) -> list[AlignedFace]:
    return [align_face(rgb, face.landmarks, template) for face in faces]


def composite(
    base: np.ndarray, aligned: Sequence[AlignedFace], restored: Sequence[RestoredFace], params: RestoreParams
) -> np.ndarray:
    """Paste the restored faces onto ``base``, the photo already upscaled by ``params.upscale``."""
    pasted = [
        (done.crop, rescale_crop_matrix(face.matrix, face.crop.shape[0], done.crop.shape[0]))
        for face, done in zip(aligned, restored)
    ]
    return paste_back(base, pasted, blend=params.blend, upscale=params.upscale)


async def upscale_background(
    backend: Backend, rgb: np.ndarray, params: RestoreParams
) -> tuple[np.ndarray, EngineInfo | None]:
    """The photo ``params.upscale`` times larger: Real-ESRGAN tile by tile (tiles of many photos share the
    upscaler's batches) where its weights are present and not declined, else Lanczos. Returns the engine, None for
    Lanczos."""
    scale = params.upscale
    engine = None if scale == 1 or params.bg_upsampler == "lanczos" else await backend.background_engine(scale)
    if engine is None or not engine.takes(rgb.shape[1], rgb.shape[0]):
        return await asyncio.to_thread(upscale_image, rgb, scale), None
    tiles = await asyncio.to_thread(
        split_tiles, rgb, tile_px=BG_TILE_PX, overlap_px=BG_OVERLAP_PX, multiple_px=realesrgan_multiple_px(scale)
    )
    out = np.empty((rgb.shape[0] * scale, rgb.shape[1] * scale, 3), np.uint8)
    for start in range(0, len(tiles), BG_TILES_IN_FLIGHT):  # bounded: a 12 MP photo is ~100 tiles
        chunk = tiles[start : start + BG_TILES_IN_FLIGHT]
        done = await asyncio.gather(*(backend.upscale_tile(TileToUpscale(tile.pixels, scale)) for tile in chunk))
        for tile, upscaled in zip(chunk, done):
            paste_tile(out, tile, upscaled.pixels, scale)
    return out, engine.info


async def restore_photo(backend: Backend, data: bytes, params: RestoreParams, context: JobContext) -> JobResult:
    timings = Timings()
    with timings.stage("decode"):
        source: DecodedImage = await decode_upload(data, context.limits)
    model = params.model or await backend.default_restore_model()
    with timings.stage("analyze"):
        faces = await backend.analyze_faces(source.rgb)
    chosen = select_faces(faces, source.width, source.height, params)
    with timings.stage("align"):
        aligned = await asyncio.to_thread(align_all, source.rgb, chosen, backend.restore_template(model))
    with timings.stage("restore"):  # the background upscale runs meanwhile
        restored, (base, background) = await asyncio.gather(
            asyncio.gather(
                *(backend.restore_face(FaceToRestore(a.crop, params.fidelity_for(model)), model) for a in aligned)
            ),
            upscale_background(backend, source.rgb, params),
        )
    with timings.stage("paste"):
        result = await asyncio.to_thread(composite, base, aligned, restored, params)
    attachments = {}
    if params.return_ == "json":
        attachments["faces"] = [
            {"box": list(face.box), "before_png_b64": png_b64(a.crop), "after_png_b64": png_b64(r.crop)}
            for face, a, r in zip(chosen, aligned, restored)
        ]
    return await encode_job_result(
        "restore",
        params.model_copy(update={"model": model}),
        source,
        result,
        [face.engine for face in restored] + ([background] if background else []),
        faces=len(chosen),
        timings=timings,
        fallback_engine="none (no face found)",
        attachments=attachments,
    )
