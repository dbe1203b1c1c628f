"""Face restoration of a whole photo: detect → align each face → restore (batched across requests) → paste back."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from deployments.common.image import DecodedImage
from deployments.common.params import parse_params
from deployments.common.upscale import upscale_image
from deployments.faces.align import AlignedFace, align_face, rescale_crop_matrix
from deployments.faces.paste import paste_back
from deployments.faces.types import Face
from deployments.restore.params import RestoreParams
from deployments.restore.types import RestoredFace
from serve_app.backend import Backend
from serve_app.jobs.context import JobContext, Timings, decode_upload
from serve_app.jobs.results import JobResult, encode_job_result, png_b64


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
    rgb: np.ndarray, aligned: Sequence[AlignedFace], restored: Sequence[RestoredFace], params: RestoreParams
) -> np.ndarray:
    base = upscale_image(rgb, params.upscale)
    pasted = [
        (done.crop, rescale_crop_matrix(face.matrix, face.crop.shape[0], done.crop.shape[0]))
        for face, done in zip(aligned, restored)
    ]
    return paste_back(base, pasted, blend=params.blend, upscale=params.upscale)


async def restore_photo(backend: Backend, data: bytes, params: RestoreParams, context: JobContext) -> JobResult:
    timings = Timings()
    with timings.stage("decode"):
        source: DecodedImage = await decode_upload(data, context.limits)
    with timings.stage("analyze"):
        faces = await backend.analyze_faces(source.rgb)
    chosen = select_faces(faces, source.width, source.height, params)
    with timings.stage("align"):
        aligned = await asyncio.to_thread(align_all, source.rgb, chosen, backend.restore_template(params.model))
    with timings.stage("restore"):
        restored: list[RestoredFace] = list(
            await asyncio.gather(*(backend.restore_face(face.crop, params.model) for face in aligned))
        )
    with timings.stage("paste"):
        result = await asyncio.to_thread(composite, source.rgb, aligned, restored, params)
    attachments = {}
    if params.return_ == "json":
        attachments["faces"] = [
            {"box": list(face.box), "before_png_b64": png_b64(a.crop), "after_png_b64": png_b64(r.crop)}
            for face, a, r in zip(chosen, aligned, restored)
        ]
    return await encode_job_result(
        "restore",
        params,
        source,
        result,
        [face.engine for face in restored],
        faces=len(chosen),
        timings=timings,
        fallback_engine="none (no face found)",
        attachments=attachments,
    )
