"""Fixtures for the bucket runner tests (unit and integration conftests import them): the real engines in-process,
photos as encoded bytes."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from deployments.common.image import encode_image
from deployments.common.weights import ModelStore, load_manifest
from serve_app.backend import Backend
from serve_app.jobs import JobContext, job_context
from serve_app.local_backend import in_process_backend
from serve_app.runner.leases import Leases
from serve_app.runner.outcomes import RetryPolicy
from serve_app.runner.routing import build_routing_table
from serve_app.runner.worker import BucketWorker, job_executor
from serve_app.settings import Settings

FAST_RETRY = RetryPolicy(max_attempts=3, initial_backoff_s=0.01, max_backoff_s=0.02)


@pytest.fixture(scope="session")
def job_ctx() -> JobContext:
    return job_context(Settings())


@pytest.fixture(scope="session")
def local_backend(mediapipe_dir) -> Backend:
    """Real engines; the model store is the one holding the built-in models (GPEN absent → classic restorer)."""
    settings = Settings(model_store=str(mediapipe_dir.parent))
    return in_process_backend(ModelStore(settings.model_store, load_manifest(settings.models_manifest)))


@pytest.fixture(scope="session")
def photo_jpeg(astronaut_rgb) -> bytes:
    """A small portrait (256 px) so each job costs tens of milliseconds."""
    import cv2

    return encode_image(cv2.resize(astronaut_rgb, (256, 256), interpolation=cv2.INTER_AREA), "jpeg")


@pytest.fixture(scope="session")
def faceless_png() -> bytes:
    """A smooth gradient: decodes fine, holds no face (an ID photo of it is the caller's fault)."""
    ramp = np.linspace(0, 255, 128, dtype=np.uint8)
    return encode_image(np.dstack([np.tile(ramp, (128, 1))] * 3), "png")


def make_worker(
    tmp_path, backend, ctx: JobContext, *, task="restore", params=None, execute=None, **options
) -> BucketWorker:
    """A worker of one route ``r``: ``tmp_path/in`` → ``tmp_path/out``, every object; jobs on ``backend`` unless
    ``execute`` replaces them."""
    table = build_routing_table(
        [
            {
                "name": "r",
                "input": str(tmp_path / "in"),
                "output": str(tmp_path / "out"),
                "task": task,
                "params": params or {},
                "suffixes": [],
            }
        ],
        ctx,
    )
    options.setdefault("retry", FAST_RETRY)
    return BucketWorker(table, execute or job_executor(backend, ctx), ctx, **options)


def race_to_claim(stores, name: str, ttl_s: float = 600.0) -> list[str]:
    """Each store (as one worker would hold it) claims ``name`` at once, under a holder of its own; who won."""
    start = threading.Barrier(len(stores))

    def claim(index: int) -> str | None:
        holder = f"worker-{index}"
        leases = Leases(ttl_s=ttl_s, holder=holder)
        start.wait()
        return holder if leases.claim(stores[index], name) is not None else None

    with ThreadPoolExecutor(len(stores)) as pool:
        return [holder for holder in pool.map(claim, range(len(stores))) if holder is not None]
