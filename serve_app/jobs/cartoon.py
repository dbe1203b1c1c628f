"""Cartoonization as the official DCT-Net service does it: whole image and per-face heads, blended."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from deployments.cartoon.compose import compose_cartoon, prepare_background
from deployments.cartoon.params import CartoonParams
from deployments.cartoon.types import StyleJob
from deployments.common.admission import CARTOON_OUTPUT
from deployments.common.params import parse_params
from deployments.faces.align import align_all
from serve_app.backend import Backend
from serve_app.jobs.context import JobContext, Timings, decode_upload
from serve_app.jobs.deadline import run_stage
from serve_app.jobs.results import JobResult, encode_job_result

HEAD_TEMPLATE = "dctnet-288"


def parse(fields: Mapping[str, Any], context: JobContext) -> CartoonParams:
    return parse_params(CartoonParams, fields, context={"styles": context.cartoon_styles})


async def run(backend: Backend, data: bytes, params: CartoonParams, context: JobContext) -> JobResult:
    timings = Timings()
    with timings.stage("decode"):
        source = await decode_upload(data, context.limits, CARTOON_OUTPUT)
    with timings.stage("prepare"):
        prepared = await run_stage(prepare_background, source.rgb)
    with timings.stage("analyze+background"):
        faces, background = await asyncio.gather(
            backend.analyze_faces(source.rgb), backend.stylize_background(StyleJob(params.style, prepared.padded))
        )
    chosen = faces[: params.max_faces]
    with timings.stage("align"):
        aligned = await run_stage(align_all, source.rgb, chosen, HEAD_TEMPLATE)
    with timings.stage("heads"):
        heads = await asyncio.gather(*(backend.stylize_head(StyleJob(params.style, face.crop)) for face in aligned))
    pasted = [(head.image, face.matrix) for face, head in zip(aligned, heads) if head.image is not None]
    with timings.stage("compose"):
        result = await run_stage(compose_cartoon, background.image, prepared, pasted)
    engines = [background.engine] + [head.engine for head in heads if head.image is not None]
    return await encode_job_result(
        "cartoon", params, source, result, engines, faces=len(pasted), timings=timings, fallback_engine="none"
    )
