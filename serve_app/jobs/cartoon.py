"""Cartoonization as the official DCT-Net service does it: whole image and per-face heads, blended."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from deployments.cartoon.compose import compose_cartoon, prepare_background
from deployments.cartoon.params import CartoonParams
from deployments.cartoon.types import STYLIZE_BACKGROUND, STYLIZE_HEAD, ImageToStylize
from deployments.common.admission import CARTOON_OUTPUT
from deployments.common.engine import EngineInfo
from deployments.common.params import parse_params
from deployments.faces.align import align_all
from deployments.faces.types import ANALYZE_FACES
from deployments.video.pipeline import FrameResult, ProcessFrame
from deployments.video.tracking import TrackedFace
from serve_app.backend import Backend
from serve_app.jobs.context import JobContext, Timings, decode_upload
from serve_app.jobs.deadline import run_in_worker
from serve_app.jobs.identity import FacePair, report_identities, template_face
from serve_app.jobs.results import JobResult, encode_job_result

HEAD_TEMPLATE = "dctnet-288"


def parse(fields: Mapping[str, Any], context: JobContext) -> CartoonParams:
    return parse_params(CartoonParams, fields, context={"styles": context.cartoon_styles})


async def run(backend: Backend, data: bytes, params: CartoonParams, context: JobContext) -> JobResult:
    timings = Timings()
    with timings.phase("decode"):
        source = await decode_upload(data, context.limits, CARTOON_OUTPUT)
    cartoon = await cartoonize(backend, source.rgb, params, timings)
    with timings.phase("identity"):  # reported, never gated: a cartoon is not a likeness
        heads, cartoons = [before for before, _ in cartoon.heads], [after for _, after in cartoon.heads]
        identities = await report_identities(backend, heads, cartoons, min_identity=None)
    return await encode_job_result(
        params,
        source,
        cartoon.rgb,
        cartoon.engines,
        faces=cartoon.faces,
        timings=timings,
        fallback_engine="none",
        identity=identities.lowest(),
    )


@dataclass(frozen=True, eq=False)
class CartoonResult:
    rgb: np.ndarray
    engines: list[EngineInfo]
    faces: int  # heads pasted
    heads: list[FacePair]  # each pasted head: the aligned photo crop and its cartoon, as the identity judge takes them


async def cartoonize(
    backend: Backend,
    rgb: np.ndarray,
    params: CartoonParams,
    timings: Timings,
    tracked: Sequence[TrackedFace] | None = None,
) -> CartoonResult:
    """Whole image and heads: the photo's faces found here, or a video frame's ``tracked`` faces (with their fade)."""
    with timings.phase("prepare"):
        prepared = await run_in_worker(prepare_background, rgb)
    with timings.phase("analyze+background"):
        found, background = await asyncio.gather(
            backend.call(ANALYZE_FACES, rgb) if tracked is None else _given(tracked),
            backend.call(STYLIZE_BACKGROUND, ImageToStylize(params.style, prepared.padded)),
        )
    chosen = list(found[: params.max_faces])
    with timings.phase("align"):
        aligned = await run_in_worker(align_all, rgb, chosen, HEAD_TEMPLATE)
    with timings.phase("heads"):
        heads = await asyncio.gather(
            *(backend.call(STYLIZE_HEAD, ImageToStylize(params.style, face.crop)) for face in aligned)
        )
    kept = [
        (face, head, chosen_face) for face, head, chosen_face in zip(aligned, heads, chosen) if head.image is not None
    ]
    pasted = [(head.image, face.matrix) for face, head, _ in kept]
    opacities = None if tracked is None else [chosen_face.opacity for _, _, chosen_face in kept]
    with timings.phase("compose"):
        result = await run_in_worker(compose_cartoon, background.image, prepared, pasted, opacities)
    engines = [background.engine] + [head.engine for _, head, _ in kept]
    heads = [
        (template_face(face.crop, HEAD_TEMPLATE), template_face(head.image, HEAD_TEMPLATE)) for face, head, _ in kept
    ]
    return CartoonResult(result, engines, len(pasted), heads)


async def _given(faces: Sequence[TrackedFace]) -> Sequence[TrackedFace]:
    return faces


async def frame_processor(backend: Backend, params: CartoonParams, context: JobContext) -> ProcessFrame:
    """The job on one video frame with its tracked faces."""

    async def process_frame(rgb: np.ndarray, faces: Sequence[TrackedFace]) -> FrameResult:
        cartoon = await cartoonize(backend, rgb, params, Timings(), faces)
        return FrameResult(cartoon.rgb, cartoon.engines)

    return process_frame
