"""What every model deployment shares: batch tunables from ``user_config``, a replica's health facts, our metrics.

The one module of ``deployments/common`` that imports Ray (a ``deployment.py``, like each job's): pure code elsewhere
stays testable without a cluster. Metrics are created lazily inside replicas (Ray metrics need a running worker);
names start with ``portrait_`` and the Grafana dashboard in ``infra/grafana/`` reads them.
"""

from __future__ import annotations

import dataclasses
import os
from functools import cache
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field
from ray.serve import metrics

from deployments.common.errors import InvalidParameter

T = TypeVar("T")


class BatchConfig(BaseModel):
    """The batch keys of a deployment's ``user_config``; ``reconfigure`` applies them without a restart."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_batch_size: int = Field(ge=1, le=256)
    batch_wait_timeout_s: float = Field(ge=0.0, le=5.0)


# Every batched deployment's defaults, in one place: its ``@serve.batch`` decorator starts with them, ``/healthz``
# reports them until a Serve YAML's ``user_config`` overrides them.
BATCH_DEFAULTS: dict[str, BatchConfig] = {
    "FaceAnalyzer": BatchConfig(max_batch_size=4, batch_wait_timeout_s=0.01),
    "PortraitMatter": BatchConfig(max_batch_size=8, batch_wait_timeout_s=0.005),
    "FaceRestorer": BatchConfig(max_batch_size=8, batch_wait_timeout_s=0.02),
    "Cartoonizer": BatchConfig(max_batch_size=8, batch_wait_timeout_s=0.02),
    "BackgroundUpscaler": BatchConfig(max_batch_size=8, batch_wait_timeout_s=0.01),
    "Colorizer": BatchConfig(max_batch_size=4, batch_wait_timeout_s=0.02),
}


def batch_defaults(deployment: str) -> dict[str, Any]:
    """Keyword arguments for ``@serve.batch`` from ``BATCH_DEFAULTS``."""
    return BATCH_DEFAULTS[deployment].model_dump()


def apply_batch_config(
    batched_method: Any, user_config: dict[str, Any] | None, defaults: BatchConfig
) -> tuple[BatchConfig, dict[str, Any]]:
    """Set a ``@serve.batch`` method's size and wait from ``user_config`` (``defaults`` for keys it leaves out);
    return the applied config and the deployment's other keys."""
    options = dict(user_config or {})
    given = {key: options.pop(key) for key in BatchConfig.model_fields if key in options}
    config = BatchConfig.model_validate({**defaults.model_dump(), **given})
    batched_method.set_max_batch_size(config.max_batch_size)
    batched_method.set_batch_wait_timeout_s(config.batch_wait_timeout_s)
    return config, options


def options_from(options_type: type[T], values: dict[str, Any], **fixed: Any) -> T:
    """Build a frozen options dataclass from ``user_config`` keys, naming the allowed keys when one is unknown."""
    allowed = {field.name for field in dataclasses.fields(options_type)} - set(fixed)
    unknown = set(values) - allowed
    if unknown:
        raise InvalidParameter(f"unknown user_config keys {sorted(unknown)}; allowed: {sorted(allowed)}")
    return options_type(**values, **fixed)


def limit_cpu_threads(num_threads: int = 1) -> None:
    """One intra-op thread per replica: replicas, not threads, are how we use more cores (2-core boxes included)."""
    import cv2

    cv2.setNumThreads(num_threads)
    os.environ.setdefault("OMP_NUM_THREADS", str(num_threads))


def torch_threads(num_threads: int = 1) -> None:
    """Torch replicas: one intra-op thread each (``limit_cpu_threads`` plus torch's own pool)."""
    import torch

    limit_cpu_threads(num_threads)
    torch.set_num_threads(num_threads)


def gpu_facts(stage: str) -> dict[str, Any]:
    """GPU memory this replica holds, when CUDA is present (``/healthz`` shows it; a gauge exports it)."""
    import torch

    if not torch.cuda.is_available():
        return {"device": "cpu"}
    record_gpu_memory(stage, torch.cuda.memory_allocated())
    return {
        "device": torch.cuda.get_device_name(),
        "gpu_memory_allocated_mib": round(torch.cuda.memory_allocated() / 2**20, 1),
        "gpu_memory_reserved_mib": round(torch.cuda.memory_reserved() / 2**20, 1),
        "gpu_memory_peak_mib": round(torch.cuda.max_memory_allocated() / 2**20, 1),
    }


def replica_facts() -> dict[str, Any]:
    """Identity of the replica answering a health probe."""
    from ray import serve

    context = serve.get_replica_context()
    return {
        "replica": context.replica_tag if hasattr(context, "replica_tag") else str(context.replica_id),
        "pid": os.getpid(),
    }


# Metrics

_SIZE_BOUNDARIES = [1, 2, 4, 8, 16, 32, 64, 128]
_SECONDS_BOUNDARIES = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300]
_BYTES_BOUNDARIES = [10_000, 100_000, 1_000_000, 5_000_000, 20_000_000]


@cache
def _batch_size() -> metrics.Histogram:
    return metrics.Histogram(
        "portrait_batch_size", description="items per batched call", boundaries=_SIZE_BOUNDARIES, tag_keys=("stage",)
    )


@cache
def _faces() -> metrics.Histogram:
    return metrics.Histogram(
        "portrait_faces_per_image", description="faces found per image", boundaries=_SIZE_BOUNDARIES, tag_keys=()
    )


@cache
def _jobs() -> metrics.Counter:
    return metrics.Counter(
        "portrait_jobs",
        description="finished jobs by task, outcome, engine and API key",
        tag_keys=("task", "outcome", "engine", "key"),
    )


@cache
def _bytes() -> metrics.Histogram:
    return metrics.Histogram(
        "portrait_image_bytes",
        description="image bytes in and out",
        boundaries=_BYTES_BOUNDARIES,
        tag_keys=("task", "direction"),
    )


@cache
def _event_lag() -> metrics.Histogram:
    return metrics.Histogram(
        "portrait_event_lag_seconds",
        description="upload time to result written",
        boundaries=_SECONDS_BOUNDARIES,
        tag_keys=("route",),
    )


@cache
def _retention_deleted() -> metrics.Counter:
    return metrics.Counter(
        "portrait_retention_deleted",
        description="objects deleted because their retention expired (kind: job or bucket)",
        tag_keys=("kind",),
    )


@cache
def _gpu_memory() -> metrics.Gauge:
    return metrics.Gauge("portrait_gpu_memory_bytes", description="GPU memory held by a replica", tag_keys=("stage",))


def record_batch(stage: str, size: int) -> None:
    _batch_size().observe(size, tags={"stage": stage})


def record_faces(counts: list[int]) -> None:
    for count in counts:
        _faces().observe(count)


def record_job(task: str, outcome: str, engine: str, bytes_in: int, bytes_out: int, *, key: str) -> None:
    """``outcome``: ``ok`` or an error code (``unsupported_image``, ``no_face``...); ``key``: the API key's id."""
    _jobs().inc(1, tags={"task": task, "outcome": outcome, "engine": engine, "key": key})
    _bytes().observe(bytes_in, tags={"task": task, "direction": "in"})
    if bytes_out:
        _bytes().observe(bytes_out, tags={"task": task, "direction": "out"})


def record_event_lag(route: str, lag_s: float) -> None:
    _event_lag().observe(max(0.0, lag_s), tags={"route": route})


def record_retention_deleted(kind: str, count: int) -> None:
    _retention_deleted().inc(count, tags={"kind": kind})


def record_gpu_memory(stage: str, allocated_bytes: int) -> None:
    _gpu_memory().set(allocated_bytes, tags={"stage": stage})
