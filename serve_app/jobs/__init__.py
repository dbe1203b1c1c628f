"""Per-job orchestration (no Ray), run the same way by every trigger: HTTP routes, bucket events, the CLI.

Each job registered in ``serve_app.registry`` has its module here, ``serve_app/jobs/<name>.py``, offering
``parse(fields, context) -> params`` (options validated the same way wherever they come from: form fields, JSON,
``x-amz-meta-portrait-params``, route defaults) and ``run(backend, data, params, context) -> JobResult``. ``JOBS``
pairs each entry with its module's two functions, so the table below is derived, never edited.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from deployments.common.errors import InternalError, PortraitError
from deployments.common.params import JobParams
from serve_app.auth.caller import require_task
from serve_app.backend import Backend
from serve_app.jobs.context import JobContext, Limits, job_context
from serve_app.jobs.results import JobResult
from serve_app.registry import JOB_ENTRIES, JobEntry, job_entry

__all__ = ["JOBS", "JobContext", "JobKind", "Limits", "job_context", "job_kind", "parse_job_params", "run_job"]


@dataclass(frozen=True)
class JobKind:
    entry: JobEntry
    parse: Callable[[Mapping[str, Any], JobContext], JobParams]
    run: Callable[[Backend, bytes, Any, JobContext], Awaitable[JobResult]]


def _job_kind_of(entry: JobEntry) -> JobKind:
    module = importlib.import_module(f"serve_app.jobs.{entry.name}")
    return JobKind(entry=entry, parse=module.parse, run=module.run)


JOBS: dict[str, JobKind] = {entry.name: _job_kind_of(entry) for entry in JOB_ENTRIES}


def job_kind(task: str) -> JobKind:
    return JOBS[job_entry(task).name]


def parse_job_params(task: str, fields: Mapping[str, Any], context: JobContext) -> JobParams:
    return job_kind(task).parse(fields, context)


async def run_job(backend: Backend, task: str, data: bytes, params: JobParams, context: JobContext) -> JobResult:
    """Run one job for the current caller (403 when its key may not run ``task``); every outcome (``ok`` or the error
    code) is counted through ``backend.observe_job``. A result of a media type its registry entry does not list is
    our bug (500), caught here before any caller reads it."""
    require_task(task)
    kind = job_kind(task)
    try:
        result = await kind.run(backend, data, params, context)
        if result.media_type not in kind.entry.result_media_types:
            raise InternalError(
                f"the {task} job answered {result.media_type!r}; its registry entry lists "
                f"{sorted(kind.entry.result_media_types)}"
            )
    except PortraitError as exc:
        backend.observe_job(task, exc.code, "none", len(data), 0)
        raise
    backend.observe_job(task, "ok", result.meta.engine, len(data), len(result.body))
    return result
