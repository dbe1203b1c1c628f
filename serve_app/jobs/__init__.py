"""Per-job orchestration (no Ray), and the one registry every trigger uses: HTTP routes, bucket events, the CLI.

``parse_job_params(task, fields, context)`` validates options the same way wherever they come from (form fields,
JSON, ``x-amz-meta-portrait-params``, route defaults); ``run_job`` runs the task against a ``Backend``. Every job
module offers the same two signatures, so the registry is a plain table.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from deployments.cartoon.params import CartoonParams
from deployments.common.errors import InvalidParameter, PortraitError
from deployments.common.params import JobParams
from deployments.idphoto.params import IdPhotoParams
from deployments.restore.params import RestoreParams
from serve_app.auth.caller import require_task
from serve_app.backend import Backend
from serve_app.jobs import cartoon, idphoto, restore
from serve_app.jobs.context import JobContext, Limits, job_context
from serve_app.jobs.results import JobResult

__all__ = ["JOBS", "JobContext", "JobKind", "Limits", "job_context", "job_kind", "parse_job_params", "run_job"]


@dataclass(frozen=True)
class JobKind:
    parse: Callable[[Mapping[str, Any], JobContext], JobParams]
    run: Callable[[Backend, bytes, Any, JobContext], Awaitable[JobResult]]
    params_model: type[JobParams]  # what ``parse`` builds: its fields and choices (plain-language requests read them)


JOBS: dict[str, JobKind] = {
    "restore": JobKind(parse=restore.parse_restore_params, run=restore.restore_photo, params_model=RestoreParams),
    "idphoto": JobKind(parse=idphoto.parse_id_photo_params, run=idphoto.make_id_photo_job, params_model=IdPhotoParams),
    "cartoon": JobKind(parse=cartoon.parse_cartoon_params, run=cartoon.cartoonize_photo, params_model=CartoonParams),
}


def job_kind(task: str) -> JobKind:
    try:
        return JOBS[task]
    except KeyError:
        raise InvalidParameter(f"unknown task {task!r}; tasks: {', '.join(sorted(JOBS))}") from None


def parse_job_params(task: str, fields: Mapping[str, Any], context: JobContext) -> JobParams:
    return job_kind(task).parse(fields, context)


async def run_job(backend: Backend, task: str, data: bytes, params: JobParams, context: JobContext) -> JobResult:
    """Run one job for the current caller (403 when its key may not run ``task``); every outcome (``ok`` or the error
    code) is counted through ``backend.observe_job``."""
    require_task(task)
    try:
        result = await job_kind(task).run(backend, data, params, context)
    except PortraitError as exc:
        backend.observe_job(task, exc.code, "none", len(data), 0)
        raise
    backend.observe_job(task, "ok", result.meta.engine, len(data), len(result.body))
    return result
