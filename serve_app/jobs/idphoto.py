"""ID photo: detect and segment together → frame, matte, relight, composite, encode, judge (in a worker thread).

The photo is written at the spec's DPI; its HD copy (``hd``) at the DPI that keeps the physical size (600 px of a
295 px photo at 300 DPI: 610 DPI), so both print at the same size, unless ``hd_dpi`` names one. HivisionIDPhotos'
``/idphoto`` runs this job with ``hd_dpi`` = its ``dpi``, as its server saves every image (``serve_app.hivision_wire``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from deployments.common.admission import IDPHOTO_INPUT
from deployments.common.errors import InternalError
from deployments.common.image import decode_image
from deployments.common.weights import ModelSpec
from deployments.faces.types import ANALYZE_FACES, Face
from deployments.idphoto.attire import default_attire_templates
from deployments.idphoto.matte import SEGMENT_PORTRAIT, PhotoToMatte, matte_engine_info
from deployments.idphoto.params import IdPhotoParams, parse_params
from deployments.idphoto.pipeline import (
    IdPhotoOutcome,
    Subject,
    frame_id_photo,
    make_id_photo,
    matte_u8,
    prepare_subject,
    source_min_side_px,
)
from deployments.idphoto.redraw import (
    REDRAW_OUTLINE_SCALE,
    REDRAW_POSE_SCALE,
    REDRAW_SEED,
    REDRAW_STEPS,
    REDRAW_STRENGTH,
    attire_prompt,
    paste_redraw,
    plan_redraw,
)
from deployments.render.types import DEFAULT_RENDER_MODEL, RENDER, Condition, Rendered, RenderRequest, model_side_px
from serve_app.backend import Backend
from serve_app.jobs.compliance import require_compliant
from serve_app.jobs.context import JobContext, Timings, decode_upload
from serve_app.jobs.deadline import deadline_unix_s, run_in_worker
from serve_app.jobs.identity import judged_face, report_identities
from serve_app.jobs.portrait import controlnet_for
from serve_app.jobs.progress import RenderSteps
from serve_app.jobs.results import JobResult, build_meta, engine_summary
from serve_app.registry import job_of


def parse(fields: Mapping[str, Any], context: JobContext) -> IdPhotoParams:
    return parse_params(fields, context.id_specs)


def render_work(params: IdPhotoParams, context: JobContext) -> float:
    """Generated clothes render one canvas of about ``side_px``² (what the synchronous route's budget weighs)."""
    if params.attire_engine != "generative":
        return 0.0
    return REDRAW_STEPS * REDRAW_STRENGTH * _side_px(context.manifest) ** 2 / 1e6


def _side_px(manifest: Mapping[str, ModelSpec]) -> int:
    """The base model's render size (SDXL's 1024 unless its entry says otherwise)."""
    return model_side_px(manifest, DEFAULT_RENDER_MODEL, 1024)


async def redrawn_attire(backend: Backend, subject: Subject, params: IdPhotoParams) -> tuple[Subject, Rendered]:
    """The template clothes of ``subject`` redrawn as cloth by the Renderer (``deployments/idphoto/redraw.py``):
    inpainted under the pose and outline ControlNets, pasted back inside the clothes' region only."""
    if subject.attire is None:
        raise InternalError("generated clothes need the template placed first")
    template = default_attire_templates()[params.attire]
    height, width = subject.rgb.shape[:2]
    plan = await run_in_worker(
        plan_redraw,
        subject.rgb,
        matte_u8(subject.low, (width, height), subject.rgb),
        subject.attire.fits,
        subject.attire.parse,
        attire_prompt(template, params.attire_color),
        _side_px(backend.manifest),
    )
    request = RenderRequest(
        prompt=plan.prompt,
        negative_prompt=plan.negative_prompt,
        kind="inpaint",
        image=plan.start,
        mask=plan.mask,
        width=plan.canvas.width,
        height=plan.canvas.height,
        steps=REDRAW_STEPS,
        strength=REDRAW_STRENGTH,
        conditions=(
            Condition(controlnet_for(backend.manifest, "openpose"), plan.pose, REDRAW_POSE_SCALE),
            Condition(controlnet_for(backend.manifest, "canny"), plan.outline, REDRAW_OUTLINE_SCALE),
        ),
        seed=REDRAW_SEED,
        deadline_unix_s=deadline_unix_s(),
    )
    rendered = await backend.call(RENDER, request, on_progress=RenderSteps().plan("attire", request.steps_to_run))
    eye_px = min(fit.placement.eye_distance_px for fit in subject.attire.fits)
    rgb = await run_in_worker(paste_redraw, subject.rgb, rendered.image, plan, eye_px)
    return replace(subject, rgb=rgb), rendered


async def _delivered_identity(
    backend: Backend, photo: np.ndarray, face: Face, outcome: IdPhotoOutcome
) -> dict[str, Any] | None:
    """The identity judge on the delivered photo's face against the source's (``meta.identity``)."""
    delivered = (await run_in_worker(decode_image, outcome.photo)).rgb
    moved = face.moved(outcome.framing.affine)
    report = await report_identities(backend, [judged_face(photo, face)], [judged_face(delivered, moved)], None)
    return report.lowest()


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
    engines = [matte_engine_info(backend.manifest, params.matting)]
    identity = None
    if params.attire_engine == "generative":
        with timings.phase("prepare"):
            subject = await run_in_worker(prepare_subject, source.rgb, faces, low_matte, params, context.id_specs)
        with timings.phase("attire_redraw"):
            subject, rendered = await redrawn_attire(backend, subject, params)
        with timings.phase("compose"):
            outcome = await run_in_worker(frame_id_photo, subject, params, context.id_specs)
        with timings.phase("identity"):  # the face as delivered, against the photo's own
            identity = await _delivered_identity(backend, source.rgb, subject.people[0], outcome)
        engines += rendered.engines
    else:
        with timings.phase("compose"):
            outcome = await run_in_worker(make_id_photo, source.rgb, faces, low_matte, params, context.id_specs)
    timings.ms.update({f"idphoto.{stage}": round(ms, 2) for stage, ms in outcome.timings_ms.items()})
    engine, weights = engine_summary(engines, fallback="none")
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
    ).model_copy(update={"identity": identity})
    return JobResult(
        body=outcome.photo,
        media_type=outcome.media_type,
        meta=meta,
        attachments={"report": outcome.report.to_json(), **({"hd": outcome.hd.to_json()} if outcome.hd else {})},
        sheet=outcome.sheet,
        hd=None if outcome.hd is None else outcome.hd.data,
    )
