"""ID photo: detect and segment together → frame, matte, relight, composite, encode, judge (in a worker thread).

The photo is written at the spec's DPI; its HD copy (``hd``) at the DPI that keeps the physical size (600 px of a
295 px photo at 300 DPI: 610 DPI), so both print at the same size, unless ``hd_dpi`` names one. HivisionIDPhotos'
``/idphoto`` runs this job with ``hd_dpi`` = its ``dpi``, as its server saves every image (``serve_app.hivision_wire``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from deployments.common.admission import IDPHOTO_INPUT
from deployments.faces.types import ANALYZE_FACES
from deployments.idphoto.matte import SEGMENT_PORTRAIT, PhotoToMatte, matte_engine_info
from deployments.idphoto.params import IdPhotoParams, parse_params
from deployments.idphoto.pipeline import make_id_photo, source_min_side_px
from serve_app.backend import Backend
from serve_app.jobs.compliance import require_compliant
from serve_app.jobs.context import JobContext, Timings, decode_upload
from serve_app.jobs.deadline import run_in_worker
from serve_app.jobs.results import JobResult, build_meta, engine_summary
from serve_app.registry import job_of


def parse(fields: Mapping[str, Any], context: JobContext) -> IdPhotoParams:
    return parse_params(fields, context.id_specs)


async def run(backend: Backend, data: bytes, params: IdPhotoParams, context: JobContext) -> JobResult:
    timings = Timings()
    spec = params.resolve_spec(context.id_specs)
    with timings.phase("decode"):
        source = await decode_upload(data, context.limits, IDPHOTO_INPUT, min_side_px=source_min_side_px(spec))
    with timings.phase("compliance"):  # before any model stage sees the photo (422 input_refused)
        await require_compliant(backend, source.rgb, "idphoto", context, lang=params.lang)
    with timings.phase("analyze+segment"):
        faces, low_matte = await asyncio.gather(
            backend.call(ANALYZE_FACES, source.rgb),
            backend.call(SEGMENT_PORTRAIT, PhotoToMatte(source.rgb, params.matting)),
        )
    with timings.phase("compose"):
        outcome = await run_in_worker(make_id_photo, source.rgb, faces, low_matte, params, context.id_specs)
    timings.ms.update({f"idphoto.{stage}": round(ms, 2) for stage, ms in outcome.timings_ms.items()})
    engine, weights = engine_summary([matte_engine_info(backend.manifest, params.matting)], fallback="none")
    meta = build_meta(
        job_of(params).name,
        params,
        engine,
        weights,
        faces=len(faces),
        size_wh=(spec.width_px, spec.height_px),
        media_type=outcome.media_type,
        body=outcome.photo,
        timings_ms=timings.ms,
        report=outcome.report.to_json(),
    )
    return JobResult(
        body=outcome.photo,
        media_type=outcome.media_type,
        meta=meta,
        attachments={"report": outcome.report.to_json(), **({"hd": outcome.hd.to_json()} if outcome.hd else {})},
        sheet=outcome.sheet,
        hd=None if outcome.hd is None else outcome.hd.data,
    )
