"""The job routes (and ``/v1/faces``): read the upload, validate the options, run the job within the request
timeout, answer image bytes or JSON.

(No ``from __future__ import annotations`` here: Serve's ingress resolves the route annotations at run time.)
"""

import logging

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from deployments.cartoon.params import CartoonParams
from deployments.idphoto.texts import pick_lang
from serve_app.app_state import backend_of as _backend
from serve_app.app_state import settings_of as _settings
from serve_app.deadlines import within_request_timeout
from serve_app.jobs import job_context, parse_job_params, render_over_budget, run_job
from serve_app.jobs.faces import find_faces
from serve_app.jobs_api.routes import accept_as_job
from serve_app.registry import JOB_ENTRIES, job_entry
from serve_app.schemas import ErrorOut, FacesOut
from serve_app.uploads import read_upload

logger = logging.getLogger(__name__)

_ERRORS = {status: {"model": ErrorOut} for status in (400, 413, 415, 422, 503, 504)}


async def _run_job(request: Request, task: str, forced: dict | None = None) -> Response:
    """Every job route: read the upload, validate the options, run the job, answer image bytes or JSON."""
    settings = _settings(request)
    upload = await read_upload(request, settings)
    context = job_context(settings)
    fields = _with_language(request, task, {**upload.fields, **(forced or {})})
    params = parse_job_params(task, fields, context)
    if refusal := render_over_budget(task, params, context, settings.sync_render_mp_steps):  # a render of minutes
        return await accept_as_job(request, task, upload.data, fields, refusal)
    result = await within_request_timeout(run_job(_backend(request), task, upload.data, params, context), settings)
    if params.return_ == "json":
        return JSONResponse(result.to_json(), headers=result.headers())
    return Response(content=result.body, media_type=result.media_type, headers=result.headers())


def _with_language(request: Request, task: str, fields: dict) -> dict:
    """A job whose report speaks (its options have ``lang``) answers in the caller's ``Accept-Language`` unless the
    request names ``lang``."""
    header = request.headers.get("accept-language")
    if header and "lang" not in fields and "lang" in job_entry(task).params_model.model_fields:
        return {**fields, "lang": pick_lang(header)}
    return fields


def _image_body(params_model: type | None = None) -> dict:
    """OpenAPI request body of an image route: the image plus the route's options, as multipart or JSON."""
    options = params_model.model_json_schema(by_alias=True) if params_model else {"type": "object", "properties": {}}
    multipart = {**options, "required": ["image"]}
    multipart["properties"] = {"image": {"type": "string", "format": "binary"}, **options.get("properties", {})}
    as_json = {**options, "required": ["image_b64"]}
    as_json["properties"] = {"image_b64": {"type": "string"}, **options.get("properties", {})}
    return {
        "requestBody": {
            "required": True,
            "content": {
                "multipart/form-data": {"schema": multipart},
                "application/json": {"schema": as_json},
                "image/*": {"schema": {"type": "string", "format": "binary"}},
            },
        }
    }


router = APIRouter()


@router.post("/v1/faces", response_model=FacesOut, responses=_ERRORS, openapi_extra=_image_body(), tags=["faces"])
async def faces(request: Request) -> FacesOut:
    """Every face: box, score, 5 landmarks and roll, in original-image pixels after EXIF orientation."""
    settings = _settings(request)
    upload = await read_upload(request, settings)
    context = job_context(settings)
    faces = find_faces(_backend(request), upload.data, context, context.manifest["face-detect-short"].engine)
    return await within_request_timeout(faces, settings)


def _job_route(task: str):
    async def run_task(request: Request) -> Response:
        return await _run_job(request, task)

    return run_task


for _entry in JOB_ENTRIES:  # one route per registered job: POST /v1/<name> (a step: /v1/<whole job>/<step>)
    router.add_api_route(
        _entry.route,
        _job_route(_entry.name),
        methods=["POST"],
        name=_entry.name,
        summary=_entry.title[0].capitalize(),
        description=_entry.description,
        responses={
            200: {
                "content": {
                    media_type: {} for media_type in _entry.result_media_types if not media_type.startswith("video/")
                }
            },
            **_ERRORS,
        },
        openapi_extra=_image_body(_entry.params_model),
        tags=["jobs" if _entry.step_of is None else f"{_entry.step_of} steps"],
    )


@router.post(
    "/api/cartoon",
    responses={200: {"content": {"image/png": {}}}, **_ERRORS},
    openapi_extra=_image_body(CartoonParams),
    tags=["compatibility"],
)
async def cartoon_compat(request: Request) -> Response:
    """The route existing cartoon clients call: multipart ``image`` in, ``image/png`` out."""
    return await _run_job(request, "cartoon", forced={"format": "png", "return": "image"})
