"""The jobs API: ``POST /v1/jobs``, ``GET /v1/jobs[?status=]``, ``GET /v1/jobs/{id}``, ``GET /v1/jobs/{id}/result``,
``DELETE /v1/jobs/{id}`` (docs/buckets-and-jobs.md "Asynchronous jobs"). A key sees its own jobs only.

(No ``from __future__ import annotations``: FastAPI resolves the route annotations at run time.)
"""

import asyncio
from typing import Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response

from deployments.common.errors import RenderNeedsJob, ServiceError
from serve_app.app_state import settings_of
from serve_app.auth import caller_id, current_key
from serve_app.jobs import job_context, parse_job_params, require_job
from serve_app.jobs.results import result_headers
from serve_app.jobs.video import check_media
from serve_app.jobs_api.download import ObjectResponse, base64_json_response
from serve_app.jobs_api.service import JobNotReady, JobsService, Submission
from serve_app.jobs_api.submission import read_submission
from serve_app.runner.callbacks import CallbackRefused, resolve_target
from serve_app.runner.jobs_records import JobAccepted, JobListOut, job_json
from serve_app.schemas import ErrorOut
from serve_app.upload_spool import SpooledBody

router = APIRouter(tags=["asynchronous jobs"])
_ERRORS = {status: {"model": ErrorOut} for status in (401, 403, 404, 409, 410, 413, 422, 429, 503)}


class JobsUnavailable(ServiceError):
    code = "jobs_unavailable"
    http_status = 503


def _jobs(request: Request) -> JobsService:
    service = getattr(request.app.state, "jobs", None)
    if service is None:
        raise JobsUnavailable("the jobs API needs the bucket runner (application arg bucket_runner: true)")
    return service


@router.post("/v1/jobs", status_code=202, response_model=JobAccepted, responses=_ERRORS)
async def submit_job(request: Request) -> JSONResponse:
    """Accept a job: 202 with its id and ``Location``; the same options, checks and errors as ``POST /v1/{task}``
    (a bad option is a 422 now, not a failed job). The same ``idempotency_key`` again: 200 with the same job."""
    service, settings = _jobs(request), settings_of(request)
    # The upload streams into a spool (a large one to a temporary file), deleted when this block ends, however.
    async with read_submission(request, service.config, settings) as job:
        require_job(job.task)
        context = job_context(settings)
        parse_job_params(job.task, job.fields, context)
        await asyncio.to_thread(check_media, job.task, job.body.content, context)  # 413/415 now, not a failed job
        if job.callback_url is not None:
            key = current_key()
            if not ((key and key.callback_secret) or service.callback_secret):
                raise CallbackRefused(
                    "no callback secret is configured (the key's, or the app's: PORTRAIT_CALLBACK_SECRET)"
                )
            await asyncio.to_thread(resolve_target, job.callback_url, service.config)
        view, created = await service.submit(caller_id(), job)
    out = view.to_out()
    accepted = JobAccepted(id=out.id, status=out.status, status_url=out.status_url, result_url=out.result_url)
    return JSONResponse(
        accepted.model_dump(), status_code=202 if created else 200, headers={"Location": out.status_url}
    )


async def accept_as_job(
    request: Request, task: str, data: bytes, fields: dict, refusal: RenderNeedsJob
) -> JSONResponse:
    """A synchronous request over the route's rendering budget (``refusal``, from ``render_over_budget``), taken as
    the job ``POST /v1/jobs`` would make of it: 202 with its status URL and ``Location``; the refusal itself where
    the jobs API does not run."""
    service = getattr(request.app.state, "jobs", None)
    if service is None:
        raise refusal
    require_job(task)
    view, _ = await service.submit(caller_id(), Submission(task, SpooledBody.of(data), dict(fields)))
    out = view.to_out()
    accepted = JobAccepted(id=out.id, status=out.status, status_url=out.status_url, result_url=out.result_url)
    why = {name: refusal.details[name] for name in ("planned_mp_steps", "sync_mp_steps")}
    body = {**accepted.model_dump(), "accepted_as_job": why}
    return JSONResponse(body, status_code=202, headers={"Location": out.status_url})


@router.get("/v1/jobs", response_model=JobListOut, responses=_ERRORS)
async def list_jobs(
    request: Request,
    status: Literal["queued", "running", "succeeded", "failed", "cancelled"] | None = None,
    limit: int = Query(100, ge=1, le=1000),
) -> JSONResponse:
    """The calling key's jobs, newest first, optionally of one status."""
    views = await _jobs(request).list(caller_id(), status, limit)
    return JSONResponse({"jobs": [job_json(view.to_out()) for view in views]})


@router.get("/v1/jobs/{job_id}", responses=_ERRORS)
async def get_job(request: Request, job_id: str) -> JSONResponse:
    """Status, progress, and the result's description or the error; 410 ``gone`` once expired."""
    view = await _jobs(request).view(caller_id(), job_id)
    return JSONResponse(job_json(view.to_out()))


@router.get("/v1/jobs/{job_id}/result", responses={200: {"content": {"image/png": {}, "image/jpeg": {}}}, **_ERRORS})
async def get_job_result(request: Request, job_id: str) -> Response:
    """The bytes and headers ``POST /v1/{task}`` answers for the same input and options; 409 until it succeeded."""
    service = _jobs(request)
    view = await service.view(caller_id(), job_id)
    if view.status != "succeeded" or view.result is None:
        raise JobNotReady(f"job {job_id} is {view.status}: no result", details={"status": view.status})
    meta = view.result.meta
    headers = result_headers(meta)
    params = parse_job_params(view.record.task, view.record.params, job_context(settings_of(request)))
    # Everything read or opened (a missing object fails) before the status line goes out; the result itself is then
    # streamed, never whole in memory (docs/buckets-and-jobs.md "Asynchronous jobs").
    redirect_from = service.config.redirect_from_bytes
    if params.return_ != "json" and redirect_from is not None and meta.bytes >= redirect_from:
        # Through Ray Serve a slow client makes the ingress hold the whole result (docs/BENCHMARKS.md): large ones
        # are read from the store itself.
        ttl_s = service.config.redirect_ttl_s
        url = await asyncio.to_thread(service.store.presigned_result_url, view, expires_s=ttl_s)
        return Response(status_code=307, headers={**headers, "Location": url, "Cache-Control": "no-store"})
    fields = await asyncio.to_thread(service.store.result_json_fields, view) if params.return_ == "json" else None
    reader = await asyncio.to_thread(service.store.open_result, view)
    if fields is not None:
        return base64_json_response(reader, "image_b64", fields, headers)
    return ObjectResponse(reader, media_type=meta.media_type, headers=headers)


@router.delete("/v1/jobs/{job_id}", responses={204: {"description": "a finished job's data deleted"}, **_ERRORS})
async def delete_job(request: Request, job_id: str) -> Response:
    """Cancel a queued or running job and delete its data (200, ``cancelled``); a finished job: delete it (204)."""
    view = await _jobs(request).cancel(caller_id(), job_id)
    if view is None:
        return Response(status_code=204)
    return JSONResponse(job_json(view.to_out()))
