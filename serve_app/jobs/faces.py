"""Faces of a photo: decode, then one call to the face analyzer."""

from __future__ import annotations

from deployments.common.admission import PHOTO_STAGE_INPUT
from deployments.faces.types import ANALYZE_FACES
from serve_app.backend import Backend
from serve_app.jobs.context import JobContext, Timings, decode_upload
from serve_app.schemas import FaceOut, FacesOut


async def find_faces(backend: Backend, data: bytes, context: JobContext, engine: str) -> FacesOut:
    """``engine``: the analyzer's label from the manifest (the routes read it once)."""
    timings = Timings()
    with timings.phase("decode"):
        image = await decode_upload(data, context.limits, PHOTO_STAGE_INPUT)
    with timings.phase("analyze"):
        faces = await backend.call(ANALYZE_FACES, image.rgb)
    return FacesOut(
        width=image.width,
        height=image.height,
        faces=[FaceOut(**face.to_json()) for face in faces],
        engine=engine,
        timings_ms=timings.ms,
    )
