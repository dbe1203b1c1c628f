"""HivisionIDPhotos' endpoints at its paths (``/idphoto``, ``/human_matting``, ...), for the clients written against
its ``deploy_api.py``: its form fields in, its JSON keys out, our graph in between (batched face analysis and
matting, our framing, compositing and encoding). The field mapping lives in ``serve_app.hivision_wire``.

Its answers are always HTTP 200 with ``status``; ours keep that for what its server answers with ``status: false``
(no face, or more than one) and give the caller's mistakes their 4xx (422, 413, 415...) with the same body shape:
``{"status": false, "error": {"code", "message"}}``, so a client that reads ``status`` keeps working and one that
reads the HTTP status learns more. Our bugs stay 500 with a request id.

(No ``from __future__ import annotations`` here: FastAPI resolves the route annotations at run time.)
"""

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.datastructures import UploadFile

from deployments.common.admission import PHOTO_STAGE_INPUT
from deployments.common.errors import InvalidParameter, PortraitError
from deployments.common.image import DecodedImage, encode_image
from deployments.common.params import parse_params as parse_job_params
from deployments.idphoto.output import PRESET_SHEETS, SHEET_DPI, encode_photo, plan_sheet, render_sheet
from deployments.idphoto.params import IdPhotoParams
from deployments.idphoto.pipeline import IdPhotoOutcome, make_id_photo, source_min_side_px
from deployments.idphoto.steps import cut_out, fit_to, matte_of_cut_out, on_white, put_background
from deployments.idphoto.watermark import draw_watermark
from serve_app.app_state import backend_of, settings_of
from serve_app.auth.caller import require_task
from serve_app.byte_caps import media_caps
from serve_app.deadlines import within_request_timeout
from serve_app.errors import error_body
from serve_app.hivision_wire import (
    HIVISION_PATHS,
    LAYOUT,
    BackgroundForm,
    CropForm,
    IdPhotoForm,
    KbForm,
    LayoutForm,
    MattingForm,
    WatermarkForm,
    base64_image,
    idphoto_options,
    image_answer,
    model_notes,
    parse_form,
    watermark_options,
)
from serve_app.jobs import JobContext, job_context
from serve_app.jobs.context import decode_upload
from serve_app.jobs.deadline import run_stage
from serve_app.uploads import UploadCap, media_type, parsed_form, read_body

TASK = "idphoto"  # an API key limited to other tasks may not call these routes
FILE_FIELD = "input_image"

router = APIRouter(tags=["HivisionIDPhotos compatibility"])


class FaceCount(Exception):
    """Not one face: its server answers ``{"status": false}`` (HTTP 200), and so do we, saying how many."""

    def __init__(self, count: int) -> None:
        super().__init__(f"{count} faces found; an ID photo needs exactly one")
        self.count = count


Step = Callable[[Request, DecodedImage, Any, JobContext], Awaitable[dict[str, Any]]]


async def _answer(request: Request, form_model: type, step: Step) -> JSONResponse:
    """Read its form, run ``step`` within the request timeout, answer in its shape (module docstring)."""
    try:
        require_task(TASK)
        settings = settings_of(request)
        context = job_context(settings)
        data, fields = await _read_form(request, settings.max_image_bytes, settings.body_timeout_s)
        form, ignored = parse_form(form_model, fields)
        if data is None:
            if form.input_image_base64 is None:
                raise InvalidParameter(f"send the image as file field '{FILE_FIELD}' or as 'input_image_base64'")
            data = base64_image(form.input_image_base64)
        answer = await within_request_timeout(_decoded_then(step, request, data, form, context), settings)
    except FaceCount as exc:
        return JSONResponse({"status": False, **error_body("face_count", str(exc), {"face_count": exc.count})})
    except PortraitError as exc:
        if exc.http_status >= 500:
            raise  # our fault: the app's handler answers 500/503 with the request id
        body = {"status": False, **error_body(exc.code, exc.message, exc.details)}
        return JSONResponse(body, status_code=exc.http_status)
    return JSONResponse({"status": True, **answer, **({"ignored_fields": ignored} if ignored else {})})


async def _decoded_then(step: Step, request: Request, data: bytes, form: Any, context: JobContext) -> dict:
    framed = isinstance(form, IdPhotoForm)
    min_side = source_min_side_px(_params(idphoto_options(form)).resolve_spec()) if framed else None
    decoded = await decode_upload(data, context.limits, PHOTO_STAGE_INPUT, min_side_px=min_side)
    return await step(request, decoded, form, context)


async def _read_form(request: Request, max_image_bytes: int, timeout_s: float) -> tuple[bytes | None, dict]:
    """The file ``input_image`` (if sent) and the text fields, query-string ones first (its watermark style options
    and its crop example's ratios arrive there); a form field of the same name wins."""
    content_type = media_type(request)
    if content_type not in ("multipart/form-data", "application/x-www-form-urlencoded"):
        raise InvalidParameter(
            f"send a form (multipart or urlencoded), as HivisionIDPhotos' API takes; got {content_type!r}"
        )
    # The image may arrive as base64 in a text field: allow for its growth as the JSON routes do.
    cap = UploadCap(media_caps(max_image_bytes, None), content_type, base64_fields=True)
    body = await read_body(request, cap=cap, timeout_s=timeout_s)
    fields: dict[str, Any] = dict(request.query_params)
    data = None
    async with parsed_form(request, body) as form:
        for key, value in form.multi_items():
            if isinstance(value, UploadFile):
                if key == FILE_FIELD:
                    data = await value.read()
            else:
                fields[key] = value
    return data, fields


def _params(options: dict[str, Any]) -> IdPhotoParams:
    return parse_job_params(IdPhotoParams, options)


async def _framed(rgb: np.ndarray, faces: list, low, form: IdPhotoForm | CropForm) -> dict[str, Any]:
    """The standard photo and, with ``hd``, its HD copy (the same crop at the source's detail, short side at least
    600 px): its ``image_base64_standard`` and ``image_base64_hd``, plus our compliance report."""
    if len(faces) != 1:
        raise FaceCount(len(faces))
    outcome: IdPhotoOutcome = await run_stage(make_id_photo, rgb, faces, low, _params(idphoto_options(form)))
    answer = {
        **image_answer("image_base64_standard", outcome.photo, outcome.media_type),
        "report": outcome.report.to_json(),
    }
    if outcome.hd is not None:
        answer.update(image_answer("image_base64_hd", outcome.hd.data, outcome.media_type))
    return answer


async def _idphoto(request: Request, decoded: DecodedImage, form: IdPhotoForm, context: JobContext) -> dict:
    backend = backend_of(request)
    faces, low = await asyncio.gather(
        backend.analyze_faces(decoded.rgb), backend.segment_portrait(decoded.rgb, "modnet")
    )
    answer = await _framed(decoded.rgb, faces, low, form)
    notes = model_notes(human_matting_model=form.human_matting_model, face_detect_model=form.face_detect_model)
    return {**answer, "models": notes}


async def _crop(request: Request, decoded: DecodedImage, form: CropForm, context: JobContext) -> dict:
    alpha = _alpha_of(decoded, "/idphoto_crop")
    faces = await backend_of(request).analyze_faces(on_white(decoded.rgb, alpha))
    answer = await _framed(decoded.rgb, faces, matte_of_cut_out(alpha), form)
    return {**answer, "models": model_notes(face_detect_model=form.face_detect_model)}


async def _matting(request: Request, decoded: DecodedImage, form: MattingForm, context: JobContext) -> dict:
    low = await backend_of(request).segment_portrait(decoded.rgb, "modnet")
    person = await run_stage(cut_out, decoded.rgb, low)
    png = await run_stage(_png, person.rgb, person.alpha, form.dpi)
    return {
        **image_answer("image_base64", png, "image/png"),
        "models": model_notes(human_matting_model=form.human_matting_model),
    }


async def _background(request: Request, decoded: DecodedImage, form: BackgroundForm, context: JobContext) -> dict:
    alpha = _alpha_of(decoded, "/add_background")
    rgb = await run_stage(put_background, decoded.rgb, alpha, form.colour_rgb(), form.render_mode())
    return await _encoded(rgb, form.dpi, form.kb)


async def _layout(request: Request, decoded: DecodedImage, form: LayoutForm, context: JobContext) -> dict:
    photo = fit_to(_opaque(decoded), (form.width, form.height))
    plan = plan_sheet(PRESET_SHEETS[LAYOUT], (form.width, form.height), form.dpi)
    if plan.count == 0:
        raise InvalidParameter(f"a {form.width}x{form.height} px photo at {form.dpi} DPI does not fit a 6-inch sheet")
    sheet = await run_stage(render_sheet, photo, plan)
    return await _encoded(sheet, SHEET_DPI, form.kb)


async def _set_kb(request: Request, decoded: DecodedImage, form: KbForm, context: JobContext) -> dict:
    return await _encoded(_opaque(decoded), form.dpi, form.kb)


async def _watermark(request: Request, decoded: DecodedImage, form: WatermarkForm, context: JobContext) -> dict:
    mark = _params(watermark_options(form)).watermark()
    marked = await run_stage(draw_watermark, _opaque(decoded), mark)
    return {**await _encoded(marked.rgb, form.dpi, form.kb), "font": marked.font}


async def _encoded(rgb: np.ndarray, dpi: float, kb: int | None) -> dict[str, Any]:
    """PNG, or with ``kb`` the best JPEG at most ``kb`` KB: never padded with zero bytes up to ``kb`` as its server
    does; ``kb`` in the answer says what size came out."""
    encoded = await run_stage(functools.partial(encode_photo, rgb, "jpeg" if kb else "png", dpi, max_kb=kb))
    answer = image_answer("image_base64", encoded.data, encoded.media_type)
    if kb:
        answer["kb"] = {"asked": kb, "size_kb": round(encoded.size_kb, 2), "note": encoded.note}
    return answer


def _png(rgb: np.ndarray, alpha: np.ndarray, dpi: float) -> bytes:
    return encode_image(rgb, "png", alpha=alpha, dpi=(float(dpi), float(dpi)))


def _alpha_of(decoded: DecodedImage, route: str) -> np.ndarray:
    if decoded.alpha is None:
        raise InvalidParameter(f"{route} needs a transparent image (RGBA PNG, e.g. from /human_matting or /idphoto)")
    return decoded.alpha


def _opaque(decoded: DecodedImage) -> np.ndarray:
    """What its server reads of an image (colour only); a transparent one over white instead of its hidden pixels."""
    return decoded.rgb if decoded.alpha is None else on_white(decoded.rgb, decoded.alpha)


_ROUTES: dict[str, tuple[type, Step, str]] = {
    "/idphoto": (IdPhotoForm, _idphoto, "A transparent ID photo (standard size and HD), as HivisionIDPhotos answers."),
    "/human_matting": (MattingForm, _matting, "The person cut out of the whole photo (transparent PNG)."),
    "/add_background": (BackgroundForm, _background, "A background colour (render 0/1/2) behind a transparent photo."),
    "/generate_layout_photos": (LayoutForm, _layout, "A 6-inch print sheet of copies of a finished photo."),
    "/watermark": (WatermarkForm, _watermark, "A tiled text watermark (style options in the query string)."),
    "/set_kb": (KbForm, _set_kb, "The photo as a JPEG of at most `kb` KB."),
    "/idphoto_crop": (CropForm, _crop, "A transparent cut-out framed to an ID photo size (standard and HD)."),
}
if tuple(_ROUTES) != HIVISION_PATHS:
    raise ImportError("serve_app.hivision_wire.HIVISION_PATHS and the routes here must list the same paths")


def _route(form_model: type, step: Step):
    async def hivision_route(request: Request) -> JSONResponse:
        return await _answer(request, form_model, step)

    return hivision_route


for _path, (_model, _step, _summary) in _ROUTES.items():
    router.add_api_route(_path, _route(_model, _step), methods=["POST"], summary=_summary, name=f"hivision{_path}")
