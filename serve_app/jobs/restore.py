"""Face restoration of a whole photo: detect → align each face → restore (batched across requests) → paste back →
colorize when asked (``colorize``: the finished photo, so its restored faces are coloured with the rest).

The orchestration only: the pure steps live in ``deployments/restore/pipeline.py``."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from deployments.colorize.tone import read_tone
from deployments.colorize.types import DEFAULT_COLORIZE_MODEL
from deployments.common.admission import restore_input_cap
from deployments.common.engine import EngineInfo
from deployments.common.errors import InvalidParameter, ModelUnavailable
from deployments.common.image import DecodedImage
from deployments.common.params import parse_params
from deployments.common.upscale import upscale_image
from deployments.faces.align import AlignedFace, HasLandmarks, align_all
from deployments.faces.types import ANALYZE_FACES
from deployments.identity.types import FaceEmbedding
from deployments.restore.gray import is_gray
from deployments.restore.params import RestoreParams, restore_template, restorer_deployment
from deployments.restore.pipeline import composite, select_faces, upscale_tiled
from deployments.restore.types import (
    BACKGROUND_ENGINE,
    RESTORE_FACE,
    RESTORER_ENGINE,
    UPSCALE_TILE,
    FaceToRestore,
    RestoredFace,
)
from deployments.video.pipeline import FrameResult, ProcessFrame
from deployments.video.tracking import TrackedFace
from serve_app.backend import Backend
from serve_app.jobs.colorize import colorize_photo
from serve_app.jobs.context import JobContext, Timings, decode_upload
from serve_app.jobs.deadline import run_in_worker
from serve_app.jobs.identity import embed_faces, report_identities, template_face
from serve_app.jobs.results import JobResult, encode_job_result, png_b64


def parse(fields: Mapping[str, Any], context: JobContext) -> RestoreParams:
    return parse_params(RestoreParams, fields)


async def upscale_background(
    backend: Backend, rgb: np.ndarray, params: RestoreParams
) -> tuple[np.ndarray, EngineInfo | None]:
    """The photo ``params.upscale`` times larger: Real-ESRGAN tile by tile (tiles of many photos share the
    upscaler's batches) where its weights are present and not declined, else Lanczos. Returns the engine, None for
    Lanczos."""
    scale = params.upscale
    engine = None if scale == 1 or params.bg_upsampler == "lanczos" else await backend.call(BACKGROUND_ENGINE, scale)
    if engine is None or not engine.takes(rgb.shape[1], rgb.shape[0]):
        return await run_in_worker(upscale_image, rgb, scale), None
    return await upscale_tiled(rgb, scale, functools.partial(backend.call, UPSCALE_TILE)), engine.info


async def run(backend: Backend, data: bytes, params: RestoreParams, context: JobContext) -> JobResult:
    timings = Timings()
    with timings.phase("decode"):
        source: DecodedImage = await decode_upload(data, context.limits, restore_input_cap(params.upscale))
    model = params.model or await default_restore_model(backend)
    with timings.phase("analyze"):  # is the photo black and white? (CodeFormer then keeps its faces gray)
        faces, gray = await asyncio.gather(backend.call(ANALYZE_FACES, source.rgb), run_in_worker(is_gray, source.rgb))
    chosen = select_faces(faces, source.width, source.height, params)
    restored = await restore_faces(backend, source.rgb, chosen, params, model, gray, timings, judge=True)
    with timings.phase("identity"):  # the faces before were embedded while they were restored
        after = [template_face(face.crop, restored.template) for face in restored.faces]
        identities = await report_identities(backend, restored.judged, after, params.min_identity)
    result, colorizer, colorize_report = await colorize_if_asked(backend, source.rgb, restored.rgb, params, timings)
    attachments = {}
    if params.return_ == "json":
        attachments["faces"] = [
            {
                "box": list(face.box),
                "before_png_b64": png_b64(a.crop),
                "after_png_b64": png_b64(r.crop),
                "identity": identities.face_json(index),
            }
            for index, (face, (a, r)) in enumerate(zip(chosen, restored.pairs()))
        ]
    return await encode_job_result(
        params.model_copy(update={"model": model}),
        source,
        result,
        restored.engines + ([colorizer] if colorizer else []),
        faces=len(chosen),
        timings=timings,
        fallback_engine="none (no face found)",
        attachments=attachments,
        report={"colorize": colorize_report} if params.colorize != "false" else None,
        identity=identities.lowest(),
    )


@dataclass(frozen=True, eq=False)
class RestoredPhoto:
    rgb: np.ndarray
    aligned: list[AlignedFace]
    faces: list[RestoredFace]
    engines: list[EngineInfo]
    template: str  # the alignment template of the crops
    judged: asyncio.Future[list[FaceEmbedding]] | None  # the aligned faces' embeddings, when asked

    def pairs(self) -> list[tuple[AlignedFace, RestoredFace]]:
        """Each face's aligned input crop and its restored crop (one template, one size)."""
        return list(zip(self.aligned, self.faces))


async def restore_faces(
    backend: Backend,
    rgb: np.ndarray,
    faces: Sequence[HasLandmarks],
    params: RestoreParams,
    model: str,
    gray: bool,
    timings: Timings,
    opacities: Sequence[float] | None = None,
    *,
    judge: bool = False,
) -> RestoredPhoto:
    """Align, restore (batched across requests) and paste back ``faces`` of ``rgb``, the background upscaled
    meanwhile: a photo's faces, or a video frame's tracked ones (``opacities``: their fade)."""
    template = restore_template(backend.manifest, model)
    with timings.phase("align"):
        aligned = await run_in_worker(align_all, rgb, faces, template)
    judged = embed_faces(backend, [template_face(face.crop, template) for face in aligned]) if judge else None
    restorer = RESTORE_FACE.at(restorer_of(backend, model))
    with timings.phase("restore"):  # the background upscale runs meanwhile
        restored, (base, background) = await asyncio.gather(
            asyncio.gather(
                *(backend.call(restorer, FaceToRestore(a.crop, params.fidelity_for(model), gray)) for a in aligned)
            ),
            upscale_background(backend, rgb, params),
        )
    with timings.phase("paste"):
        result = await run_in_worker(composite, base, aligned, restored, params, opacities)
    engines = [face.engine for face in restored] + ([background] if background else [])
    return RestoredPhoto(result, aligned, list(restored), engines, template, judged)


def restorer_of(backend: Backend, model: str) -> str:
    """The deployment that runs ``model``; a model not deployed here is the caller's mistake."""
    if model not in backend.restore_models:
        raise InvalidParameter(f"model {model!r} is not deployed here; deployed: {list(backend.restore_models)}")
    return restorer_deployment(backend.manifest[model])


async def default_restore_model(backend: Backend) -> str:
    """The first deployed restorer (in the app's order) whose weights are loaded; the first of all when none is."""
    for model in backend.restore_models:
        if (await backend.call(RESTORER_ENGINE.at(restorer_of(backend, model)))).neural:
            return model
    return backend.restore_models[0]


async def frame_processor(backend: Backend, params: RestoreParams, context: JobContext) -> ProcessFrame:
    """The job on one video frame with its tracked faces (the model chosen once per video)."""
    model = params.model or await default_restore_model(backend)

    async def process_frame(rgb: np.ndarray, faces: Sequence[TrackedFace]) -> FrameResult:
        chosen = list(faces[: params.max_faces])
        gray = await run_in_worker(is_gray, rgb)
        restored = await restore_faces(
            backend, rgb, chosen, params, model, gray, Timings(), [face.opacity for face in chosen]
        )
        return FrameResult(restored.rgb, restored.engines)

    return process_frame


async def colorize_if_asked(
    backend: Backend, source_rgb: np.ndarray, result: np.ndarray, params: RestoreParams, timings: Timings
) -> tuple[np.ndarray, EngineInfo | None, dict[str, Any]]:
    """``result`` in colour when ``params.colorize`` is true, or auto and the source reads monochrome
    (``deployments.colorize.tone``); the engine that coloured it; what was decided and why (the response's
    ``report.colorize``). Auto without DDColor's weights leaves the photo as it is and says so; true is a 503."""
    if params.colorize == "false":
        return result, None, {}
    tone = await run_in_worker(read_tone, source_rgb)
    report: dict[str, Any] = {"requested": params.colorize, "tone": tone.to_json()}
    if params.colorize == "auto" and not tone.monochrome:
        return result, None, {**report, "colorized": False, "reason": "the photo is in colour"}
    model = await backend.call(DEFAULT_COLORIZE_MODEL)
    report["model"] = model
    try:
        colored, engine = await colorize_photo(backend, result, model, timings)
    except ModelUnavailable as exc:
        if params.colorize == "true":
            raise
        return result, None, {**report, "colorized": False, "reason": exc.message, "fix": exc.details.get("fix")}
    return colored, engine, {**report, "colorized": True}
