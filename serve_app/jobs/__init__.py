"""Per-job orchestration (no Ray), and the one registry every trigger uses: HTTP routes, bucket events, the CLI.

``parse_job_params(task, fields, context)`` validates options the same way wherever they come from (form fields,
JSON, ``x-amz-meta-portrait-params``, route defaults); ``run_job`` runs the task against a ``Backend``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from deployments.cartoon.params import CartoonParams
from deployments.cartoon.styles import cartoon_styles
from deployments.common.errors import InvalidParameter, PortraitError
from deployments.common.params import JobParams, parse_params
from deployments.common.weights import load_manifest
from deployments.idphoto.params import parse_params as parse_idphoto_params
from deployments.idphoto.specs import IdSpec, load_specs
from deployments.restore.params import RestoreParams
from serve_app.jobs.cartoon import cartoonize_photo
from serve_app.jobs.idphoto import make_id_photo_job
from serve_app.jobs.restore import restore_photo
from serve_app.jobs.results import JobResult
from serve_app.service import Backend, Limits
from serve_app.settings import Settings


@dataclass(frozen=True)
class JobContext:
    """What a job needs besides its image and options: input limits and the ID-photo standards."""

    limits: Limits
    id_specs: Mapping[str, IdSpec]
    cartoon_styles: tuple[str, ...]


@dataclass(frozen=True)
class JobKind:
    parse: Callable[[Mapping[str, Any], JobContext], JobParams]
    run: Callable[[Backend, bytes, Any, JobContext], Awaitable[JobResult]]


JOBS: dict[str, JobKind] = {
    "restore": JobKind(
        parse=lambda fields, context: parse_params(RestoreParams, fields),
        run=lambda backend, data, params, context: restore_photo(backend, data, params, context.limits),
    ),
    "idphoto": JobKind(
        parse=lambda fields, context: parse_idphoto_params(fields, context.id_specs),
        run=lambda backend, data, params, context: make_id_photo_job(
            backend, data, params, context.id_specs, context.limits
        ),
    ),
    "cartoon": JobKind(
        parse=lambda fields, context: parse_params(CartoonParams, fields, context={"styles": context.cartoon_styles}),
        run=lambda backend, data, params, context: cartoonize_photo(backend, data, params, context.limits),
    ),
}


def job_kind(task: str) -> JobKind:
    try:
        return JOBS[task]
    except KeyError:
        raise InvalidParameter(f"unknown task {task!r}; tasks: {', '.join(sorted(JOBS))}") from None


def parse_job_params(task: str, fields: Mapping[str, Any], context: JobContext) -> JobParams:
    return job_kind(task).parse(fields, context)


async def run_job(backend: Backend, task: str, data: bytes, params: JobParams, context: JobContext) -> JobResult:
    """Run one job; every outcome (``ok`` or the error code) is counted through ``backend.observe_job``."""
    try:
        result = await job_kind(task).run(backend, data, params, context)
    except PortraitError as exc:
        backend.observe_job(task, exc.code, "none", len(data), 0)
        raise
    backend.observe_job(task, "ok", result.meta.engine, len(data), len(result.body))
    return result


def job_context(settings: Settings) -> JobContext:
    return JobContext(
        limits=Limits(max_bytes=settings.max_image_bytes, max_pixels=settings.max_image_pixels),
        id_specs=_id_specs(Path(settings.id_specs)),
        cartoon_styles=_cartoon_styles(Path(settings.models_manifest)),
    )


@lru_cache(maxsize=4)
def _id_specs(path: Path) -> dict[str, IdSpec]:
    return load_specs(path)


@lru_cache(maxsize=4)
def _cartoon_styles(manifest_path: Path) -> tuple[str, ...]:
    return tuple(cartoon_styles(load_manifest(manifest_path)))
