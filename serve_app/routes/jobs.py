"""The job routes (and ``/v1/faces``): read the upload, validate the options, run the job within the request
timeout, answer image bytes or JSON.

(No ``from __future__ import annotations`` here: Serve's ingress resolves the route annotations at run time.)
"""

import logging

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from deployments.cartoon.params import CartoonParams
from deployments.idphoto.params import IdPhotoParams
from deployments.restore.params import RestoreParams
from serve_app.app_state import backend_of as _backend
from serve_app.app_state import settings_of as _settings
from serve_app.deadlines import within_request_timeout
from serve_app.jobs import job_context, parse_job_params, run_job
from serve_app.jobs.faces import find_faces
from serve_app.schemas import ErrorOut, FacesOut
from serve_app.uploads import read_upload

logger = logging.getLogger(__name__)

_ERRORS = {status: {"model": ErrorOut} for status in (400, 413, 415, 422, 503, 504)}


async def _run_job(request: Request, task: str, forced: dict | None = None) -> Response:
    """Every job route: read the upload, validate the options, run the job, answer image bytes or JSON."""
    settings = _settings(request)
    upload = await read_upload(request, settings)
    context = job_context(settings)
    params = parse_job_params(task, {**upload.fields, **(forced or {})}, context)
    result = await within_request_timeout(run_job(_backend(request), task, upload.data, params, context), settings)
    if params.return_ == "json":
        return JSONResponse(result.to_json(), headers=result.headers())
    return Response(content=result.body, media_type=result.media_type, headers=result.headers())


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


@router.post(
    "/v1/restore",
    responses={200: {"content": {"image/png": {}, "image/jpeg": {}}}, **_ERRORS},
    openapi_extra=_image_body(RestoreParams),
    tags=["jobs"],
)
async def restore(request: Request) -> Response:
    """Restore every face of a photo with GPEN (or the classic engine when weights are absent) and paste it back.

    The ``X-Portrait-Engine`` header (and ``meta.engine`` with ``return=json``) names the engine that ran.
    """
    return await _run_job(request, "restore")


@router.post(
    "/v1/idphoto",
    responses={200: {"content": {"image/jpeg": {}, "image/png": {}}}, **_ERRORS},
    openapi_extra=_image_body(IdPhotoParams),
    tags=["jobs"],
)
async def idphoto(request: Request) -> Response:
    """An ID photo to a standard (``spec``) or a custom size, with a compliance report.

    ``return=json`` adds the report and the print sheet (``layout``); ``strict=true`` refuses a non-compliant
    result with 422 and the reasons. The image response carries ``X-Portrait-Compliance: pass|fail``.
    """
    return await _run_job(request, "idphoto")


@router.post(
    "/v1/cartoon",
    responses={200: {"content": {"image/png": {}}}, **_ERRORS},
    openapi_extra=_image_body(CartoonParams),
    tags=["jobs"],
)
async def cartoon(request: Request) -> Response:
    """Cartoonize a photo (DCT-Net whole image + per-face heads; classic engine when weights are absent)."""
    return await _run_job(request, "cartoon")


@router.post(
    "/api/cartoon",
    responses={200: {"content": {"image/png": {}}}, **_ERRORS},
    openapi_extra=_image_body(CartoonParams),
    tags=["compatibility"],
)
async def cartoon_compat(request: Request) -> Response:
    """The route existing cartoon clients call: multipart ``image`` in, ``image/png`` out."""
    return await _run_job(request, "cartoon", forced={"format": "png", "return": "image"})
