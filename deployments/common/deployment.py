"""What every model deployment shares: the replica skeleton (``ModelReplica``), its health facts, our metrics.

The one module of ``deployments/common`` that imports Ray (a ``deployment.py``, like each job's): pure code elsewhere
stays testable without a cluster. Metrics are created lazily inside replicas (Ray metrics need a running worker);
names start with ``portrait_`` and the Grafana dashboard in ``infra/grafana/`` reads them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import cache
from types import SimpleNamespace
from typing import Any, ClassVar

from ray import serve
from ray.serve import metrics

from deployments.common.batching import Progress, run_per_item
from deployments.common.errors import InvalidParameter, PortraitError
from deployments.common.settings import get_model_settings
from deployments.common.stage import BatchConfig, Stage


class ModelReplica:
    """The skeleton of every model deployment: a subclass states its ``Stage`` as ``stage`` and defines one
    ``@serve.batch`` method per name in ``stage.batched``, each ``return await self.run_batch("<name>", items)``.

    Here: the predictor built from the model store and the options, rebuilt when ``reconfigure`` changes them; the
    batch keys applied to every batched method; per-item outcomes (one bad item never fails its batch-mates); the
    queries; Serve's health probe and ``/healthz``'s report with the GPU memory this replica holds.
    ``binding``: the deployment's name when the stage is bound more than once (``Stage.bindings``).
    """

    stage: ClassVar[Stage]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "stage" not in cls.__dict__:  # cloudpickle rebuilds a class in a replica as an empty skeleton first
            return
        stage = cls.stage
        methods = [stage.batch_method(name) for name in stage.batched]
        missing = [name for name in methods if not hasattr(getattr(cls, name, None), "set_max_batch_size")]
        missing += [name for name in stage.streamed if not inspect.isasyncgenfunction(getattr(cls, name, None))]
        if missing:
            raise TypeError(
                f"{cls.__name__} declares batched {missing} but defines no @serve.batch method (or, for a streamed "
                "one, no async generator that streams it) of that name"
            )

    def __init__(self, binding: str | None = None, *args: Any) -> None:
        torch_threads(1)
        self._name = binding or self.stage.name
        self._args = args
        self._store = get_model_settings().open_model_store()
        self._batch = self.stage.batch
        self._options = self.stage.make_options({})
        self._predictor = self.stage.make_predictor(self._store, self._options, args)

    def reconfigure(self, user_config: dict[str, Any]) -> None:
        """``user_config``: the batch keys plus the fields of ``stage.options``."""
        options = dict(user_config or {})
        given = {key: options.pop(key) for key in BatchConfig.model_fields if key in options}
        self._batch = BatchConfig.model_validate({**self.stage.batch.model_dump(), **given})
        for name in self.stage.batched:
            method = getattr(self, self.stage.batch_method(name))
            method.set_max_batch_size(self._batch.max_batch_size)
            method.set_batch_wait_timeout_s(self._batch.batch_wait_timeout_s)
        new_options = self.stage.make_options(options)
        if new_options != self._options:
            self._predictor = self.stage.make_predictor(self._store, new_options, self._args)
            self._options = new_options

    async def run_batch(self, method: str, items: list[Any]) -> list[Any]:
        """One outcome per item, ``predictor.<method>`` over the admitted ones, in a worker thread."""
        record_batch(self._name, len(items))
        predictor = self._predictor
        return await asyncio.to_thread(run_per_item, getattr(predictor, method), items, predictor.admit, self._name)

    async def stream_batch(self, method: str, items: list[Any]) -> AsyncIterator[list[Any]]:
        """``run_batch`` of a streamed method (``StageCall.streamed``): each item's latest ``Progress`` whenever one
        moves, then one outcome per item. ``predictor.<method>`` takes ``on_progress(item, Progress)``, which its
        worker thread calls."""
        record_batch(self._name, len(items))
        predictor, loop, moves = self._predictor, asyncio.get_running_loop(), asyncio.Queue()

        def on_progress(item: Any, progress: Progress) -> None:
            loop.call_soon_threadsafe(moves.put_nowait, (id(item), progress))

        run = functools.partial(getattr(predictor, method), on_progress=on_progress)
        outcomes = asyncio.ensure_future(asyncio.to_thread(run_per_item, run, items, predictor.admit, self._name))
        latest = {id(item): Progress(0, 0) for item in items}
        while True:
            move = asyncio.ensure_future(moves.get())
            await asyncio.wait((outcomes, move), return_when=asyncio.FIRST_COMPLETED)
            if not move.done():
                move.cancel()
                break
            key, progress = move.result()
            latest[key] = progress
            yield [latest[id(item)] for item in items]
        yield await outcomes

    async def hold_multiplexed(self, load: Callable[[str], Awaitable[Any]]) -> None:
        """Have the batch's multiplexed model (``serve.get_multiplexed_model_id()``, if any) loaded by ``load``, the
        deployment's ``@serve.multiplexed`` method. One that fails to load fails each item in its run, typed."""
        model_id = serve.get_multiplexed_model_id()
        if model_id:
            try:
                await load(model_id)
            except PortraitError:
                pass  # the predictor meets the same error per item: one outcome each, not one for the batch

    async def ask(self, method: str, *args: Any) -> Any:
        """A query of ``stage.queries`` (``StageCall(batched=False)``), answered at once."""
        if method not in self.stage.queries:
            raise InvalidParameter(f"{self._name} answers {list(self.stage.queries)}, not {method!r}")
        return getattr(self._predictor, method)(*args)

    def check_health(self) -> None:
        """Serve's periodic probe (``Predictor.probe``), which also refreshes the GPU memory gauge."""
        self._predictor.probe()
        gpu_facts(self._name)

    async def health(self) -> dict[str, Any]:
        return {
            **self._predictor.health(),
            "options": dataclasses.asdict(self._options),
            "batch": self._batch.model_dump(),
            **gpu_facts(self._name),
            **replica_facts(),
        }


async def evictable(load: Callable[[str], None], unload: Callable[[str], None], model_id: str) -> SimpleNamespace:
    """What a ``@serve.multiplexed`` method returns for a model its predictor holds: ``load(model_id)`` run in a
    thread, and an entry whose ``__del__`` Ray calls on eviction (an instance attribute: the garbage collector never
    calls it) to ``unload(model_id)``."""
    await asyncio.to_thread(load, model_id)
    return SimpleNamespace(__del__=functools.partial(unload, model_id))


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
