"""Our metrics beside Ray Serve's built-in ones (exported on each node's metrics port, scraped by Prometheus).

Created lazily inside replicas (Ray metrics need a running worker). Names start with ``portrait_``; the Grafana
dashboard in ``infra/grafana/`` reads them.
"""

from __future__ import annotations

from functools import cache

from ray.serve import metrics

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
        "portrait_jobs", description="finished jobs by task, outcome and engine", tag_keys=("task", "outcome", "engine")
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
def _gpu_memory() -> metrics.Gauge:
    return metrics.Gauge("portrait_gpu_memory_bytes", description="GPU memory held by a replica", tag_keys=("stage",))


def record_batch(stage: str, size: int) -> None:
    _batch_size().observe(size, tags={"stage": stage})


def record_faces(counts: list[int]) -> None:
    for count in counts:
        _faces().observe(count)


def record_job(task: str, outcome: str, engine: str, bytes_in: int, bytes_out: int) -> None:
    """``outcome``: ``ok`` or an error code (``unsupported_image``, ``no_face``...)."""
    _jobs().inc(1, tags={"task": task, "outcome": outcome, "engine": engine})
    _bytes().observe(bytes_in, tags={"task": task, "direction": "in"})
    if bytes_out:
        _bytes().observe(bytes_out, tags={"task": task, "direction": "out"})


def record_event_lag(route: str, lag_s: float) -> None:
    _event_lag().observe(max(0.0, lag_s), tags={"route": route})


def record_gpu_memory(stage: str, allocated_bytes: int) -> None:
    _gpu_memory().set(allocated_bytes, tags={"stage": stage})
