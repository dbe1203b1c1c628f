"""How far a face moved, for every job that changes faces, and the ``identity`` job (``POST /v1/identity``).

The judge embeds (``EMBED_FACE``: the faces of all pairs in one go, so they share its batches); the verdict is
``deployments.identity.verdict.compare``. A job reports each face's ``Identity`` beside its crops, the lowest in
``meta.identity`` and the ``X-Portrait-Identity`` header; ``min_identity`` makes a lower one a 422
``identity_changed``. Where the judge cannot answer (no weights, no deployment), a job that was not asked for a bar
still answers, saying why its identity is missing; one that was asked answers the judge's error.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any

import cv2
import numpy as np

from deployments.common.admission import FACE_CROP_INPUT, PHOTO_STAGE_INPUT
from deployments.common.errors import IdentityChanged, InvalidParameter, NoFaceFound, ServiceError
from deployments.common.params import parse_params
from deployments.faces.align import AlignTemplate, get_template
from deployments.faces.types import ANALYZE_FACES, Face
from deployments.identity.params import IdentityParams
from deployments.identity.types import EMBED_FACE, FaceEmbedding, FaceToJudge, Identity
from deployments.identity.verdict import compare
from serve_app.backend import Backend
from serve_app.jobs.context import JobContext, Timings, decode_base64, decode_upload
from serve_app.jobs.results import JSON_MEDIA_TYPE, JobResult, build_meta
from serve_app.registry import job_of

# A face reaches the judge with this much of the photo around its box (each side, in box sides): the judge aligns
# from the landmarks, and the object store carries a region, not the photo.
REGION_MARGIN = 0.5

FacePair = tuple[FaceToJudge, FaceToJudge]


def template_face(crop: np.ndarray, template: AlignTemplate | str) -> FaceToJudge:
    """A crop aligned to ``template`` (any size: its points scale with it), as the judge takes it."""
    template = get_template(template) if isinstance(template, str) else template
    return FaceToJudge(crop, template.points * (crop.shape[0] / template.size_px))


def photo_face(rgb: np.ndarray, face: Face) -> FaceToJudge:
    """The region of ``rgb`` around ``face`` with its landmarks moved into it."""
    x0, y0, x1, y1 = face.box
    margin = REGION_MARGIN * max(x1 - x0, y1 - y0)
    left, top = max(int(x0 - margin), 0), max(int(y0 - margin), 0)
    right, bottom = min(int(np.ceil(x1 + margin)), rgb.shape[1]), min(int(np.ceil(y1 + margin)), rgb.shape[0])
    region = np.ascontiguousarray(rgb[top:bottom, left:right])
    return FaceToJudge(region, np.asarray(face.landmarks, float) - (left, top))


def judged_face(rgb: np.ndarray, face: Face) -> FaceToJudge:
    """The face's region as the judge takes it, shrunk (with its landmarks) to the judge's input cap when a large face
    on a large photo exceeds it (the judge aligns to 150 px: nothing is lost)."""
    item = photo_face(rgb, face)
    height, width = item.image.shape[:2]
    scale = min(1.0, (FACE_CROP_INPUT.max_pixels / (width * height)) ** 0.5 * 0.99)
    if scale == 1.0:
        return item
    size = (max(int(width * scale), 1), max(int(height * scale), 1))
    small = cv2.resize(item.image, size, interpolation=cv2.INTER_AREA)
    return FaceToJudge(small, np.asarray(item.landmarks, float) * (size[0] / width, size[1] / height))


def embed_faces(backend: Backend, faces: Sequence[FaceToJudge]) -> asyncio.Future[list[FaceEmbedding]]:
    """The faces' embeddings, asked now: a job embeds the faces before it changes them while it changes them."""
    embedding = asyncio.ensure_future(asyncio.gather(*(backend.call(EMBED_FACE, face) for face in faces)))
    embedding.add_done_callback(lambda done: done.cancelled() or done.exception())  # read, whoever awaits it
    return embedding


async def judge_pairs(backend: Backend, pairs: Sequence[FacePair]) -> list[Identity]:
    before, after = embed_faces(backend, [a for a, _ in pairs]), embed_faces(backend, [b for _, b in pairs])
    return [compare(a, b) for a, b in zip(await before, await after)]


class IdentityReport:
    """Each face's identity (``None`` where the judge could not answer) and the lowest, as results carry them."""

    def __init__(self, identities: Sequence[Identity] | None, unavailable: str | None = None) -> None:
        self.identities = list(identities or [])
        self.unavailable = unavailable

    def face_json(self, index: int) -> dict[str, Any] | None:
        return self.identities[index].to_json() if index < len(self.identities) else None

    def lowest(self) -> dict[str, Any] | None:
        """``meta.identity``: the face that moved most (its index), or why there is none."""
        if self.unavailable is not None:
            return {"unavailable": self.unavailable}
        if not self.identities:
            return None
        index = min(range(len(self.identities)), key=lambda i: self.identities[i].similarity)
        return {"face": index, **self.identities[index].to_json()}

    def require(self, min_identity: float | None) -> None:
        """A 422 ``identity_changed`` naming the first face below ``min_identity``."""
        if min_identity is None:
            return
        for index, identity in enumerate(self.identities):
            if identity.similarity < min_identity:
                raise IdentityChanged(
                    f"face {index} moved too far: similarity {identity.similarity:.3f} < min_identity "
                    f"{min_identity:g} ({identity.judge}; its same-person bar is {identity.threshold:g})",
                    details={"face": index, "min_identity": min_identity, **identity.to_json()},
                )


async def report_identities(
    backend: Backend,
    before: Sequence[FaceToJudge] | asyncio.Future[list[FaceEmbedding]],
    after: Sequence[FaceToJudge],
    min_identity: float | None,
) -> IdentityReport:
    """Each face before (or their embeddings, asked earlier: ``embed_faces``) against the same face after; without
    a judge, a report that says why (or, with ``min_identity``, the judge's error)."""
    if not after:
        return IdentityReport([])
    try:
        embedded = before if isinstance(before, asyncio.Future) else embed_faces(backend, before)
        report = IdentityReport([compare(a, b) for a, b in zip(await embedded, await embed_faces(backend, after))])
    except ServiceError as exc:
        if min_identity is not None:
            raise
        return IdentityReport(None, unavailable=f"{exc.code}: {exc.message}")
    except InvalidParameter as exc:  # the judge is not deployed in this app (an older Serve YAML)
        if min_identity is not None:
            raise
        return IdentityReport(None, unavailable=exc.message)
    report.require(min_identity)
    return report


def parse(fields: Mapping[str, Any], context: JobContext) -> IdentityParams:
    return parse_params(IdentityParams, fields)


async def run(backend: Backend, data: bytes, params: IdentityParams, context: JobContext) -> JobResult:
    """Is the person in ``data`` the one in the reference: each photo's chosen face, embedded by the judge."""
    if params.reference_b64 is None:
        raise InvalidParameter("the identity job compares two photos: send the other as reference_b64")
    timings = Timings()
    with timings.phase("decode"):
        reference_bytes = await decode_base64(params.reference_b64, "reference_b64")
        image, reference = await asyncio.gather(
            decode_upload(data, context.limits, PHOTO_STAGE_INPUT),
            decode_upload(reference_bytes, context.limits, PHOTO_STAGE_INPUT),
        )
    with timings.phase("analyze"):
        faces, reference_faces = await asyncio.gather(
            backend.call(ANALYZE_FACES, image.rgb), backend.call(ANALYZE_FACES, reference.rgb)
        )
    face, reference_face = params.face or 0, params.reference_face or 0
    chosen = (
        _face_at(faces, face, "image", "face"),
        _face_at(reference_faces, reference_face, "reference", "reference_face"),
    )
    with timings.phase("identity"):
        (identity,) = await judge_pairs(
            backend, [(photo_face(image.rgb, chosen[0]), photo_face(reference.rgb, chosen[1]))]
        )
    answer = {**identity.to_json(), "face": face, "reference_face": reference_face}
    body = json.dumps(answer).encode()
    meta = build_meta(
        job_of(params).name,
        params.model_copy(update={"reference_b64": f"<{len(reference_bytes)} bytes>"}),
        identity.judge,
        [],
        faces=len(faces),
        size_wh=(image.width, image.height),
        media_type=JSON_MEDIA_TYPE,
        body=body,
        timings_ms=timings.ms,
        identity={"face": face, **identity.to_json()},
    )
    return JobResult(body, JSON_MEDIA_TYPE, meta)


def _face_at(faces: Sequence[Face], index: int, photo: str, option: str) -> Face:
    if not faces:
        raise NoFaceFound(f"no face found in the {photo}")
    if index >= len(faces):
        raise InvalidParameter(f"{option}={index}: the {photo} has {len(faces)} face(s), 0 = largest")
    return faces[index]
