"""Per-job orchestration (no Ray), run the same way by every trigger: HTTP routes, bucket events, the CLI.

Each job registered in ``serve_app.registry`` has its module here, ``serve_app/jobs/<name>.py`` (a step of a whole
job: ``STEPS[<step>]`` of ``serve_app/jobs/<whole job>_steps.py``), offering ``parse(fields, context) -> params``
(options validated the same way wherever they come from: form fields, JSON, ``x-amz-meta-portrait-params``, route
defaults) and ``run(backend, data, params, context) -> JobResult``. ``JOBS`` pairs each entry with its module's two
functions, so the table below is derived, never edited.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from deployments.common.errors import InternalError, PortraitError, RenderNeedsJob
from deployments.common.params import JobParams
from deployments.video.probe import looks_like_video
from serve_app.auth.caller import require_task
from serve_app.backend import Backend
from serve_app.byte_caps import SNIFF_BYTES, video_needs_job
from serve_app.jobs.context import JobContext, Limits, job_context
from serve_app.jobs.results import JobResult
from serve_app.jobs.video import VideoInput, run_video
from serve_app.registry import JOB_ENTRIES, JobEntry, job_entry

__all__ = [
    "JOBS",
    "JobContext",
    "JobKind",
    "Limits",
    "job_context",
    "job_kind",
    "parse_job_params",
    "require_job",
    "run_job",
]


@dataclass(frozen=True)
class JobKind:
    entry: JobEntry
    parse: Callable[[Mapping[str, Any], JobContext], JobParams]
    run: Callable[[Backend, bytes, Any, JobContext], Awaitable[JobResult]]
    # a job that renders: the megapixel-steps its params plan (the synchronous routes' budget weighs them)
    render_work: Callable[[Any, JobContext], float] | None = None


def _job_kind_of(entry: JobEntry) -> JobKind:
    module = importlib.import_module(entry.module)
    functions = module if entry.step is None else module.STEPS[entry.step]
    render_work = getattr(functions, "render_work", None)
    return JobKind(entry=entry, parse=functions.parse, run=functions.run, render_work=render_work)


JOBS: dict[str, JobKind] = {entry.name: _job_kind_of(entry) for entry in JOB_ENTRIES}


def job_kind(task: str) -> JobKind:
    return JOBS[job_entry(task).name]


def require_job(task: str) -> None:
    """403 when the caller's key may not run ``task`` (a key allowed a whole job may run its steps)."""
    require_task(task, job_entry(task).step_of)


def render_over_budget(
    task: str, params: JobParams, context: JobContext, budget_mp_steps: float
) -> RenderNeedsJob | None:
    """The refusal a synchronous run of ``task`` earns when ``params`` plan more rendering (megapixel-steps) than
    ``budget_mp_steps``; None within it, or for a job that does not render. A job route then hands the request to the
    jobs API instead (``serve_app.jobs_api.routes.accept_as_job``)."""
    render_work = job_kind(task).render_work
    planned = render_work(params, context) if render_work is not None else 0.0
    if planned <= budget_mp_steps:
        return None
    return RenderNeedsJob(
        f"this {task} plans {planned:.1f} megapixel-steps of rendering, more than a synchronous request may "
        f"({budget_mp_steps:g}): submit it as an asynchronous job, POST /v1/jobs with task={task}",
        details={"planned_mp_steps": round(planned, 2), "sync_mp_steps": budget_mp_steps, "jobs_url": "/v1/jobs"},
    )


def parse_job_params(task: str, fields: Mapping[str, Any], context: JobContext) -> JobParams:
    return job_kind(task).parse(fields, context)


async def run_job(
    backend: Backend, task: str, data: bytes | VideoInput, params: JobParams, context: JobContext
) -> JobResult:
    """Run one job for the current caller (403 when its key may not run ``task``); every outcome (``ok`` or the error
    code) is counted through ``backend.observe_job``. A result of a media type its registry entry does not list is
    our bug (500), caught here before any caller reads it.

    ``data``: the photo's bytes, or a ``VideoInput`` from the asynchronous paths (jobs, bucket routes); video bytes
    here come from a synchronous route and are refused (415 ``video_needs_job``)."""
    require_job(task)
    kind = job_kind(task)
    size_in = data.path.stat().st_size if isinstance(data, VideoInput) else len(data)
    try:
        if isinstance(data, VideoInput):
            result = await run_video(backend, task, data, params, context)
        elif looks_like_video(data[:SNIFF_BYTES]):
            raise video_needs_job(task)
        else:
            result = await kind.run(backend, data, params, context)
        if result.media_type not in kind.entry.result_media_types:
            raise InternalError(
                f"the {task} job answered {result.media_type!r}; its registry entry lists "
                f"{sorted(kind.entry.result_media_types)}"
            )
    except PortraitError as exc:
        backend.observe_job(task, exc.code, "none", size_in, 0)
        raise
    backend.observe_job(task, "ok", result.meta.engine, size_in, result.size_bytes)
    return result
