"""The ID photo one step at a time (``POST /v1/idphoto/<step>``), each usable on the output of the one before:
``matte`` (the person on nothing, a transparent PNG) → ``crop`` (a cut-out framed to a standard) → ``background``
(a colour behind it) → ``watermark`` → ``layout`` (a print sheet) or ``filesize`` (a JPEG inside [min_kb, max_kb]).
A front-end mattes once and previews colours, sizes and sheets without matting again.

Every step validates its options with :class:`IdPhotoParams` (one validation place, the same names and ranges as
``/v1/idphoto``) and accepts only the fields that mean something to it: another one is a 422 naming what it takes.
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from deployments.common.admission import PHOTO_STAGE_INPUT
from deployments.common.errors import InvalidParameter
from deployments.common.image import DecodedImage, encode_image
from deployments.idphoto.output import encode_photo, encode_sheet, plan_sheet, render_sheet
from deployments.idphoto.params import TRANSPARENT, IdPhotoParams, hex_to_rgb, parse_params
from deployments.idphoto.pipeline import make_id_photo
from deployments.idphoto.steps import cut_out, matte_of_cut_out, on_white, put_background
from deployments.idphoto.watermark import draw_watermark
from serve_app.backend import Backend
from serve_app.jobs.context import JobContext, Timings, decode_upload
from serve_app.jobs.deadline import run_stage
from serve_app.jobs.results import JobResult, build_meta, engine_summary

DEFAULT_DPI = 300.0
_SIZE = {"spec", "width_px", "height_px", "width_mm", "height_mm", "dpi"}
_LOOKS = {
    "whitening_strength",
    "brightness_strength",
    "contrast_strength",
    "saturation_strength",
    "sharpen_strength",
    "horizontal_flip",
}
_ENCODING = {"format", "min_kb", "max_kb"}
_WATERMARK = {f"watermark_{name}" for name in ("text", "size", "opacity", "angle", "color", "space")}
_SHEET = {"layout", "canvas_width_mm", "canvas_height_mm", "canvas_dpi", "gap_mm", "cut_lines", "format", "dpi"}


@dataclass(frozen=True)
class StepResult:
    body: bytes
    media_type: str
    size_wh: tuple[int, int]
    faces: int = 0
    attachments: Mapping[str, Any] | None = None


StepRun = Callable[[Backend, DecodedImage, IdPhotoParams, JobContext], Awaitable[StepResult]]


@dataclass(frozen=True)
class Step:
    name: str
    fields: frozenset[str]
    run: StepRun
    needs_alpha: bool = False
    matting: bool = False  # runs the matter (its engine is reported)

    @property
    def route(self) -> str:
        return f"/v1/idphoto/{self.name}"


def parse_step(step: Step, fields: Mapping[str, Any], context: JobContext) -> IdPhotoParams:
    """The step's options as :class:`IdPhotoParams`; a field the step does not read is refused, named."""
    extra = sorted(set(fields) - step.fields - {"return"})
    if extra:
        raise InvalidParameter(
            f"{', '.join(extra)}: not an option of the {step.name} step; it takes {', '.join(sorted(step.fields))}",
            details={"step": step.name, "accepted": sorted(step.fields)},
        )
    return parse_params(fields, context.id_specs)


async def run_step(backend: Backend, step: Step, data: bytes, params: IdPhotoParams, context: JobContext) -> JobResult:
    timings = Timings()
    with timings.stage("decode"):
        source = await decode_upload(data, context.limits, PHOTO_STAGE_INPUT)
    if step.needs_alpha and source.alpha is None:
        raise InvalidParameter(f"the {step.name} step needs a transparent image (the output of /v1/idphoto/matte)")
    with timings.stage(step.name):
        result = await step.run(backend, source, params, context)
    engine, weights = engine_summary([backend.matte_engine(params.matting)] if step.matting else [], fallback="none")
    meta = build_meta(
        "idphoto",
        params,
        engine,
        weights,
        faces=result.faces,
        size_wh=result.size_wh,
        media_type=result.media_type,
        body=result.body,
        timings_ms=timings.ms,
        report=(result.attachments or {}).get("report"),
    )
    return JobResult(
        result.body, result.media_type, meta, attachments={"step": step.name, **(result.attachments or {})}
    )


def _dpi(source: DecodedImage) -> float:
    return source.dpi[0] if source.dpi else DEFAULT_DPI


def _opaque(source: DecodedImage) -> np.ndarray:
    """The colour pixels; a transparent image over white (its hidden pixels may be anything)."""
    return source.rgb if source.alpha is None else on_white(source.rgb, source.alpha)


async def _matte(backend: Backend, source: DecodedImage, params: IdPhotoParams, context: JobContext) -> StepResult:
    """The person cut out of the whole photo: a transparent PNG of the source's size (``matting`` picks the model)."""
    low = await backend.segment_portrait(source.rgb, params.matting)
    person = await run_stage(cut_out, source.rgb, low)
    dpi = (_dpi(source),) * 2
    png = await run_stage(functools.partial(encode_image, person.rgb, "png", alpha=person.alpha, dpi=dpi))
    return StepResult(png, "image/png", (source.width, source.height))


async def _crop(backend: Backend, source: DecodedImage, params: IdPhotoParams, context: JobContext) -> StepResult:
    """A transparent cut-out (from the matte step) framed to a standard (``spec``) or a custom size, with the
    touch-ups; ``return=json`` adds the compliance report and, with ``hd``, the HD copy (``hd_b64``)."""
    faces = await backend.analyze_faces(on_white(source.rgb, source.alpha))
    framed = params.model_copy(update={"background": TRANSPARENT, "format": "png"})
    low = matte_of_cut_out(source.alpha)
    outcome = await run_stage(make_id_photo, source.rgb, faces, low, framed, context.id_specs)
    spec = framed.resolve_spec(context.id_specs)
    report = outcome.report.to_json()
    hd = (
        {"hd_b64": base64.b64encode(outcome.hd.data).decode("ascii"), "hd": outcome.hd.to_json()}
        if outcome.hd is not None
        else {}
    )
    return StepResult(
        outcome.photo, outcome.media_type, (spec.width_px, spec.height_px), len(faces), {"report": report, **hd}
    )


async def _background(backend: Backend, source: DecodedImage, params: IdPhotoParams, context: JobContext) -> StepResult:
    """A colour (``background``, ``render``) behind a transparent photo; ``min_kb``/``max_kb`` for a JPEG."""
    colour = params.background_colour(params.resolve_spec(context.id_specs))
    if colour == TRANSPARENT:
        raise InvalidParameter("the background step puts a colour behind the person: name one, not transparent")
    rgb = await run_stage(put_background, source.rgb, source.alpha, hex_to_rgb(colour), params.render)
    return await _encoded(rgb, _dpi(source), params)


async def _watermark(backend: Backend, source: DecodedImage, params: IdPhotoParams, context: JobContext) -> StepResult:
    """A tiled text watermark (``watermark_text``, ``watermark_size``...) over a photo."""
    mark = params.watermark()
    if mark is None:
        raise InvalidParameter("the watermark step needs watermark_text")
    marked = await run_stage(draw_watermark, _opaque(source), mark)
    result = await _encoded(marked.rgb, _dpi(source), params)
    return StepResult(
        result.body, result.media_type, result.size_wh, attachments={"font": marked.font, **(result.attachments or {})}
    )


async def _filesize(backend: Backend, source: DecodedImage, params: IdPhotoParams, context: JobContext) -> StepResult:
    """The photo as a JPEG inside [``min_kb``, ``max_kb``] (quality searched, never padded)."""
    if params.min_kb is None and params.max_kb is None:
        raise InvalidParameter("the filesize step needs min_kb, max_kb or both")
    return await _encoded(_opaque(source), _dpi(source), params)


async def _layout(backend: Backend, source: DecodedImage, params: IdPhotoParams, context: JobContext) -> StepResult:
    """Copies at the photo's physical size (its DPI, or ``dpi``) on the sheet ``layout`` names."""
    canvas = params.sheet_canvas()
    if canvas is None:
        raise InvalidParameter("the layout step needs layout: 6inch, 5inch, a4, 3r, 4r or custom")
    photo_dpi = params.dpi if "dpi" in params.model_fields_set else _dpi(source)
    plan = plan_sheet(canvas, (source.width, source.height), photo_dpi)
    if plan.count == 0:
        raise InvalidParameter(f"a {source.width}x{source.height} px photo at {photo_dpi:g} DPI does not fit the sheet")
    sheet = await run_stage(functools.partial(render_sheet, _opaque(source), plan, cut_lines=params.cut_lines))
    body = await run_stage(encode_sheet, sheet, params.format, canvas.dpi)
    media_type = "image/png" if params.format == "png" else "image/jpeg"
    return StepResult(body, media_type, plan.sheet_wh, attachments={"copies": plan.count})


async def _encoded(rgb: np.ndarray, dpi: float, params: IdPhotoParams) -> StepResult:
    encoded = await run_stage(
        functools.partial(encode_photo, rgb, params.format, dpi, min_kb=params.min_kb, max_kb=params.max_kb)
    )
    return StepResult(
        encoded.data, encoded.media_type, (rgb.shape[1], rgb.shape[0]), attachments={"encoding": encoded.to_json()}
    )


STEPS: dict[str, Step] = {
    step.name: step
    for step in (
        Step("matte", frozenset({"matting"}), _matte, matting=True),
        Step(
            "crop",
            frozenset(_SIZE | _LOOKS | {"head_ratio", "top_ratio", "align", "lighting", "hd", "strict"}),
            _crop,
            needs_alpha=True,
        ),
        Step("background", frozenset({"background", "render", "spec"} | _ENCODING), _background, needs_alpha=True),
        Step("watermark", frozenset(_WATERMARK | _ENCODING), _watermark),
        Step("layout", frozenset(_SHEET), _layout),
        Step("filesize", frozenset(_ENCODING - {"format"}), _filesize),
    )
}
