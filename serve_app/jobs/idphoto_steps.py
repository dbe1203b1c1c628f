"""The ID photo one step at a time (the registry's ``idphoto-<step>`` jobs, ``POST /v1/idphoto/<step>``), each usable
on the output of the one before: ``matte`` (the person on nothing, a transparent PNG) → ``crop`` (a cut-out framed to
a standard) → ``background`` (a colour behind it) → ``watermark`` → ``layout`` (a print sheet) or ``filesize`` (a JPEG
inside [min_kb, max_kb]). A front-end mattes once and previews colours, sizes and sheets without matting again.

Each step takes its own options (``deployments/idphoto/step_params.py``: another one is a 422 naming what it takes),
validated by :class:`IdPhotoParams` (one validation place, the same names and ranges as ``/v1/idphoto``). A step
writes its file at the source's DPI (300 without one) or at ``dpi``; crop's HD copy at the DPI that keeps the physical
size, or at ``hd_dpi``. HivisionIDPhotos' API (``serve_app/routes/hivision.py``) is these steps and the whole job
behind its wire format: what it answers that ours did not (a DPI per request, a photo fitted to a size before its
sheet, a sheet under a KB ceiling) are options of the steps here.

Every step has a pixel cap on its input (``Step.cap``, ``deployments/common/admission.py``), checked from the
image's header before any pixel is decoded (413 ``image_too_many_pixels`` naming the cap, as the whole job's output
cap is): the steps whose output is their input's size (background, watermark, filesize) or a sheet of copies of it
(layout) take at most an ID photo (``IDPHOTO_OUTPUT``, 4 MP); the matte step's cut-out is its photo's size and the
crop step takes that cut-out, so both take at most ``CUT_OUT_OUTPUT`` (16 MP), and they work in bands of rows
(``deployments/idphoto/steps.py``): no step holds a float32 copy of its whole input.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from deployments.common.admission import CUT_OUT_OUTPUT, IDPHOTO_OUTPUT, PixelCap
from deployments.common.errors import InvalidParameter
from deployments.common.image import DecodedImage, encode_image
from deployments.common.params import JobParams
from deployments.faces.types import ANALYZE_FACES
from deployments.idphoto.matte import SEGMENT_PORTRAIT, PhotoToMatte, matte_engine_info
from deployments.idphoto.output import encode_photo, encode_sheet, plan_sheet, render_sheet
from deployments.idphoto.params import TRANSPARENT, IdPhotoParams, hex_to_rgb, parse_params
from deployments.idphoto.pipeline import make_id_photo
from deployments.idphoto.step_params import STEP_PARAMS
from deployments.idphoto.steps import cut_out, fit_to, matte_of_cut_out, on_white, put_background
from deployments.idphoto.watermark import draw_watermark
from serve_app.backend import Backend
from serve_app.jobs.compliance import require_compliant
from serve_app.jobs.context import JobContext, Timings, decode_upload
from serve_app.jobs.deadline import run_in_worker
from serve_app.jobs.results import JobResult, build_meta, engine_summary

DEFAULT_DPI = 300.0


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
    """One step: its options (``STEP_PARAMS[name]``), the pixel cap on its input (module docstring) and what it
    does; ``parse`` and ``run`` are its job's."""

    name: str
    work: StepRun
    cap: PixelCap
    needs_alpha: bool = False
    matting: bool = False  # runs the matter (its engine is reported)
    gated: bool = False  # takes a person's whole photo: the compliance gate checks it first

    @property
    def params_model(self) -> type[JobParams]:
        return STEP_PARAMS[self.name]

    def parse(self, fields: Mapping[str, Any], context: JobContext) -> JobParams:
        """The step's options: a field the step does not read is refused, named; the values checked by
        :class:`IdPhotoParams` (presets, colours, consistency)."""
        accepted = set(self.params_model.model_fields) - {"return_"}
        extra = sorted(set(fields) - accepted - {"return"})
        if extra:
            raise InvalidParameter(
                f"{', '.join(extra)}: not an option of the {self.name} step; it takes {', '.join(sorted(accepted))}",
                details={"step": self.name, "accepted": sorted(accepted)},
            )
        checked = parse_params(fields, context.id_specs)
        return self.params_model.model_validate(checked.model_dump(by_alias=True, exclude_unset=True))

    async def run(self, backend: Backend, data: bytes, params: JobParams, context: JobContext) -> JobResult:
        timings = Timings()
        full = parse_params(params.model_dump(by_alias=True, exclude_unset=True), context.id_specs)
        with timings.phase("decode"):
            source = await decode_upload(data, context.limits, self.cap)
        if self.needs_alpha and source.alpha is None:
            raise InvalidParameter(f"the {self.name} step needs a transparent image (the output of /v1/idphoto/matte)")
        if self.gated:
            with timings.phase("compliance"):
                await require_compliant(backend, await _opaque(source), "idphoto", context, lang=full.lang)
        with timings.phase(self.name):
            result = await self.work(backend, source, full, context)
        engines = [matte_engine_info(backend.manifest, full.matting)] if self.matting else []
        engine, weights = engine_summary(engines, fallback="none")
        meta = build_meta(
            f"idphoto-{self.name}",
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
            result.body, result.media_type, meta, attachments={"step": self.name, **(result.attachments or {})}
        )


def _dpi(source: DecodedImage, params: IdPhotoParams) -> float:
    """The DPI a step writes: ``dpi`` when the caller gave it, else the source's own (300 without one)."""
    if "dpi" in params.model_fields_set:
        return params.dpi
    return source.dpi[0] if source.dpi else DEFAULT_DPI


async def _opaque(source: DecodedImage) -> np.ndarray:
    """The colour pixels; a transparent image over white (its hidden pixels may be anything), composited in a worker
    thread a band of rows at a time."""
    return source.rgb if source.alpha is None else await run_in_worker(on_white, source.rgb, source.alpha)


async def _matte(backend: Backend, source: DecodedImage, params: IdPhotoParams, context: JobContext) -> StepResult:
    """The person cut out of the whole photo: a transparent PNG of the source's size (``matting`` picks the model).
    Cap: ``CUT_OUT_OUTPUT`` (16 MP) on the photo, the cut-out's size; the cut-out is made a band of rows at a time."""
    low = await backend.call(SEGMENT_PORTRAIT, PhotoToMatte(source.rgb, params.matting))
    person = await run_in_worker(cut_out, source.rgb, low)
    dpi = (_dpi(source, params),) * 2
    png = await run_in_worker(functools.partial(encode_image, person.rgb, "png", alpha=person.alpha, dpi=dpi))
    return StepResult(png, "image/png", (source.width, source.height))


async def _crop(backend: Backend, source: DecodedImage, params: IdPhotoParams, context: JobContext) -> StepResult:
    """A transparent cut-out (from the matte step) framed to a standard (``spec``) or a custom size, with the
    touch-ups; ``return=json`` adds the compliance report and, with ``hd``, the HD copy (``hd_b64``). Cap:
    ``CUT_OUT_OUTPUT`` (16 MP, the matte step's output) on the cut-out; its output is an ID photo (the params hold
    it to ``IDPHOTO_OUTPUT``), framed by the cut-out's alpha shrunk to at most 4 MP."""
    faces = await backend.call(ANALYZE_FACES, await _opaque(source))
    framed = params.model_copy(update={"background": TRANSPARENT, "format": "png"})
    low = matte_of_cut_out(source.alpha)
    outcome = await run_in_worker(make_id_photo, source.rgb, faces, low, framed, context.id_specs)
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
    """A colour (``background``, ``render``) behind a transparent photo; ``min_kb``/``max_kb`` for a JPEG. Cap:
    ``IDPHOTO_OUTPUT`` (4 MP) on the photo, the output's size; composited a band of rows at a time."""
    colour = params.background_colour(params.resolve_spec(context.id_specs))
    if colour == TRANSPARENT:
        raise InvalidParameter("the background step puts a colour behind the person: name one, not transparent")
    rgb = await run_in_worker(put_background, source.rgb, source.alpha, hex_to_rgb(colour), params.render)
    return await _encoded(rgb, _dpi(source, params), params)


async def _watermark(backend: Backend, source: DecodedImage, params: IdPhotoParams, context: JobContext) -> StepResult:
    """A tiled text watermark (``watermark_text``, ``watermark_size``...) over a photo. Cap: ``IDPHOTO_OUTPUT``
    (4 MP) on the photo, the output's size; blended a band of rows at a time."""
    mark = params.watermark()
    if mark is None:
        raise InvalidParameter("the watermark step needs watermark_text")
    marked = await run_in_worker(draw_watermark, await _opaque(source), mark)
    result = await _encoded(marked.rgb, _dpi(source, params), params)
    return StepResult(
        result.body, result.media_type, result.size_wh, attachments={"font": marked.font, **(result.attachments or {})}
    )


async def _filesize(backend: Backend, source: DecodedImage, params: IdPhotoParams, context: JobContext) -> StepResult:
    """The photo as a JPEG inside [``min_kb``, ``max_kb``] (quality searched, never padded). Cap:
    ``IDPHOTO_OUTPUT`` (4 MP) on the photo, the output's size."""
    if params.min_kb is None and params.max_kb is None:
        raise InvalidParameter("the filesize step needs min_kb, max_kb or both")
    return await _encoded(await _opaque(source), _dpi(source, params), params)


async def _layout(backend: Backend, source: DecodedImage, params: IdPhotoParams, context: JobContext) -> StepResult:
    """Copies at the photo's physical size (its DPI, or ``dpi``; resized to ``width_px`` x ``height_px`` first when
    given) on the sheet ``layout`` names; ``min_kb``/``max_kb`` for a JPEG sheet inside them. Cap:
    ``IDPHOTO_OUTPUT`` (4 MP) on the photo (an ID photo; the sheet has its own cap, ``SHEET_OUTPUT``)."""
    canvas = params.sheet_canvas()
    if canvas is None:
        raise InvalidParameter("the layout step needs layout: 6inch, 5inch, a4, 3r, 4r or custom")
    size = (source.width, source.height) if params.width_px is None else (params.width_px, params.height_px)
    photo_dpi = _dpi(source, params)
    plan = plan_sheet(canvas, size, photo_dpi)
    if plan.count == 0:
        raise InvalidParameter(f"a {size[0]}x{size[1]} px photo at {photo_dpi:g} DPI does not fit the sheet")
    photo = await run_in_worker(fit_to, await _opaque(source), size)
    sheet = await run_in_worker(functools.partial(render_sheet, photo, plan, cut_lines=params.cut_lines))
    if params.min_kb is not None or params.max_kb is not None:
        encoded = await _encoded(sheet, canvas.dpi, params)
        return dataclasses.replace(encoded, attachments={"copies": plan.count, **(encoded.attachments or {})})
    body = await run_in_worker(encode_sheet, sheet, params.format, canvas.dpi)
    media_type = "image/png" if params.format == "png" else "image/jpeg"
    return StepResult(body, media_type, plan.sheet_wh, attachments={"copies": plan.count})


async def _encoded(rgb: np.ndarray, dpi: float, params: IdPhotoParams) -> StepResult:
    encoded = await run_in_worker(
        functools.partial(encode_photo, rgb, params.format, dpi, min_kb=params.min_kb, max_kb=params.max_kb)
    )
    return StepResult(
        encoded.data, encoded.media_type, (rgb.shape[1], rgb.shape[0]), attachments={"encoding": encoded.to_json()}
    )


STEPS: dict[str, Step] = {
    step.name: step
    for step in (
        Step("matte", _matte, CUT_OUT_OUTPUT, matting=True, gated=True),
        Step("crop", _crop, CUT_OUT_OUTPUT, needs_alpha=True, gated=True),
        Step("background", _background, IDPHOTO_OUTPUT, needs_alpha=True),
        Step("watermark", _watermark, IDPHOTO_OUTPUT),
        Step("layout", _layout, IDPHOTO_OUTPUT),
        Step("filesize", _filesize, IDPHOTO_OUTPUT),
    )
}
