"""The HTTP API as a FastAPI app factory. No Ray imports: the backend arrives through ``app.state``.

(No ``from __future__ import annotations`` here: Serve's ingress resolves the route annotations at run time.)
"""

import asyncio
import logging
from collections.abc import Awaitable
from typing import TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from deployments.cartoon.params import CartoonParams
from deployments.common.errors import RequestTimeout
from deployments.common.weights import fix_command
from deployments.idphoto.params import IdPhotoParams
from deployments.restore.params import RestoreParams
from serve_app import __version__
from serve_app.app_state import backend_of as _backend
from serve_app.app_state import settings_of as _settings
from serve_app.bucket.webhook import install_event_routes
from serve_app.errors import install_error_handlers
from serve_app.jobs import job_context, parse_job_params, run_job
from serve_app.jobs.faces import find_faces
from serve_app.openai_api import openai_model_list
from serve_app.openai_api import router as plain_language_routes
from serve_app.schemas import ErrorOut, FacesOut, FallbackOut, HealthOut
from serve_app.settings import Settings
from serve_app.uploads import read_upload
from serve_app.webpage import install_web_page

logger = logging.getLogger(__name__)

_ERRORS = {status: {"model": ErrorOut} for status in (400, 413, 415, 422, 503, 504)}
T = TypeVar("T")


async def _within_timeout(work: Awaitable[T], settings: Settings) -> T:
    """A job's answer, or our 504 ``timeout`` after ``request_timeout_s`` (a model scaling up from zero replicas
    answers late; the caller gets JSON it can act on instead of a connection that hangs)."""
    try:
        return await asyncio.wait_for(work, settings.request_timeout_s)
    except TimeoutError:
        raise RequestTimeout(
            f"no answer within {settings.request_timeout_s:g} s; retry later",
            details={"timeout_s": settings.request_timeout_s},
        ) from None


async def _run_job(request: Request, task: str, forced: dict | None = None) -> Response:
    """Every job route: read the upload, validate the options, run the job, answer image bytes or JSON."""
    settings = _settings(request)
    upload = await read_upload(request, max_bytes=settings.max_image_bytes)
    context = job_context(settings)
    params = parse_job_params(task, {**upload.fields, **(forced or {})}, context)
    result = await _within_timeout(run_job(_backend(request), task, upload.data, params, context), settings)
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


def overall_status(deployments: dict[str, dict]) -> str:
    """``failing`` when a deployment a job needs fails; ``degraded`` when anything else is short of ``ok``."""
    failing = any(r.get("status") == "failing" and r.get("required", True) for r in deployments.values())
    if failing:
        return "failing"
    return "ok" if all(r.get("status", "ok") in ("ok", "idle") for r in deployments.values()) else "degraded"


def fallbacks_of(deployments: dict[str, dict]) -> list[FallbackOut]:
    """Deployments short of a model they could load (a non-neural engine serving, or a neural one missing a helper
    such as MTCNN), each with the exact command that fetches what it lacks."""
    fallbacks = []
    for name, report in deployments.items():
        missing = [model["name"] for model in report.get("models", []) if model.get("fix")]
        if missing:
            engine = str(report.get("engine", "unknown"))
            fallbacks.append(
                FallbackOut(deployment=name, engine=engine, missing_models=missing, fix=fix_command(missing))
            )
    return fallbacks


def create_api() -> FastAPI:
    """Build the API; the caller attaches ``app.state.backend`` (and optionally ``app.state.settings``)."""
    api = FastAPI(
        title="portrait-serve",
        version=__version__,
        description="Face restoration, ID photos and cartoonization on Ray Serve.",
    )
    install_error_handlers(api)
    install_event_routes(api)
    install_web_page(api)
    api.include_router(plain_language_routes)  # /v1/instructions and the OpenAI-compatible routes

    @api.get("/healthz", response_model=HealthOut, responses={503: {"model": HealthOut}}, tags=["operations"])
    async def healthz(request: Request) -> JSONResponse:
        """Readiness: every deployment asked within ``PORTRAIT_HEALTH_TIMEOUT_S``; 200 when ``ok`` or ``degraded``,
        503 when ``failing`` (a deployment a job needs has no running replica or does not answer). For load
        balancers; ``/livez`` is the liveness probe."""
        deployments = await _backend(request).health()
        models = [model for report in deployments.values() for model in report.get("models", [])]
        status = overall_status(deployments)
        fallbacks = fallbacks_of(deployments)
        missing = [name for fallback in fallbacks for name in fallback.missing_models]
        body = HealthOut(
            status=status,
            version=__version__,
            deployments=deployments,
            models=models,
            fallbacks=fallbacks,
            fix=fix_command(missing) if missing else None,
        )
        return JSONResponse(body.model_dump(), status_code=503 if status == "failing" else 200)

    @api.get("/livez", tags=["operations"])
    async def livez() -> dict:
        """Liveness: this ingress replica answers, asking no other deployment (never restart on a model's state)."""
        return {"status": "alive", "version": __version__}

    @api.get("/v1/models", tags=["operations"])
    async def list_models(request: Request) -> dict:
        """Every model in the manifest, with the state the serving replicas see (``models``), and the same as an
        OpenAI model list (``data``: the ids a client may send as ``model``)."""
        deployments = await _backend(request).health()
        seen = {model["name"]: model for report in deployments.values() for model in report.get("models", [])}
        context = job_context(_settings(request))
        manifest = context.manifest
        return openai_model_list(manifest, context) | {
            "models": [
                {
                    "name": spec.name,
                    "task": spec.task,
                    "architecture": spec.architecture,
                    "description": spec.description,
                    "license": spec.license,
                    "url": spec.url,
                    "sha256": spec.sha256,
                    "builtin": spec.builtin,
                    "state": seen.get(spec.name, {}).get("state", "not-loaded"),
                }
                for spec in manifest.values()
            ]
        }

    @api.post("/v1/faces", response_model=FacesOut, responses=_ERRORS, openapi_extra=_image_body(), tags=["faces"])
    async def faces(request: Request) -> FacesOut:
        """Every face: box, score, 5 landmarks and roll, in original-image pixels after EXIF orientation."""
        settings = _settings(request)
        upload = await read_upload(request, max_bytes=settings.max_image_bytes)
        context = job_context(settings)
        faces = find_faces(_backend(request), upload.data, context, context.manifest["face-detect-short"].engine)
        return await _within_timeout(faces, settings)

    @api.post(
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

    @api.get("/v1/idphoto/specs", tags=["jobs"])
    async def idphoto_specs(request: Request) -> dict:
        """The ID-photo standards (``configs/id_specs.yaml``): size, DPI, head-height and top-margin ranges."""
        return {"specs": [spec.to_json() for spec in job_context(_settings(request)).id_specs.values()]}

    @api.post(
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

    @api.get("/v1/cartoon/styles", tags=["jobs"])
    async def cartoon_styles(request: Request) -> dict:
        """Every cartoon style, with the engine each of its models runs on (``dctnet`` or a non-neural fallback)."""
        reports = await _backend(request).health()
        heads = reports.get("CartoonHead", {}).get("styles", {})
        backgrounds = reports.get("CartoonBackground", {}).get("styles", {})
        return {
            "styles": [
                {
                    "name": style,
                    "engine": backgrounds.get(style, {}).get("engine", "unknown"),
                    "head_engine": heads.get(style, {}).get("engine", "unknown"),
                }
                for style in job_context(_settings(request)).cartoon_styles
            ]
        }

    @api.post(
        "/v1/cartoon",
        responses={200: {"content": {"image/png": {}}}, **_ERRORS},
        openapi_extra=_image_body(CartoonParams),
        tags=["jobs"],
    )
    async def cartoon(request: Request) -> Response:
        """Cartoonize a photo (DCT-Net whole image + per-face heads; classic engine when weights are absent)."""
        return await _run_job(request, "cartoon")

    @api.post(
        "/api/cartoon",
        responses={200: {"content": {"image/png": {}}}, **_ERRORS},
        openapi_extra=_image_body(CartoonParams),
        tags=["compatibility"],
    )
    async def cartoon_compat(request: Request) -> Response:
        """The route existing cartoon clients call: multipart ``image`` in, ``image/png`` out."""
        return await _run_job(request, "cartoon", forced={"format": "png", "return": "image"})

    return api
