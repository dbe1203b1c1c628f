"""How far a running job is, for ``GET /v1/jobs/{id}``: whoever runs the job listens (``reporting_to``); the job
reports what it can count (a video its frames, a render its steps) with ``report_progress``, a no-op where nobody
listens (the synchronous routes). And why a queued job waits: the failure that sent it back to the queue for the
next scan (``waiting.json``: a model whose weights are not there yet, a stage that is down), until it ends.

The bucket runner's listener is ``StoredProgress``: ``progress.json`` in the job's work folder of its output store,
which the jobs store reads back while the job holds its claim (``read_progress``). Writes are throttled (an object PUT
each): at most one a second, the last one always.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Hashable, Iterator
from contextvars import ContextVar
from typing import Any

from deployments.common.batching import Progress
from storage.base import ObjectStore
from storage.errors import ObjectNotFound
from storage.keys import safe_join

logger = logging.getLogger(__name__)

WORK_FOLDER = "_work"
PROGRESS_NAME = "progress.json"
WAITING_NAME = "waiting.json"
JSON_TYPE = "application/json"
WRITE_EVERY_S = 1.0

Listener = Callable[[float, dict[str, int]], None]
_CURRENT: ContextVar[Listener | None] = ContextVar("job_progress", default=None)


def work_prefix(key: str) -> str:
    """The work folder of the job on the object at ``key`` in its route's output store (a video's chunks, the
    progress)."""
    return safe_join(WORK_FOLDER, key) + "/"


def report_progress(fraction: float, detail: dict[str, int]) -> None:
    """The current job is ``fraction`` done (0..1); ``detail``: what was counted (``frames``, ``steps_done``...)."""
    listener = _CURRENT.get()
    if listener is not None:
        listener(min(max(fraction, 0.0), 1.0), detail)


@contextlib.contextmanager
def reporting_to(listener: Listener) -> Iterator[None]:
    """Jobs started inside (their tasks copy this context) report to ``listener``."""
    token = _CURRENT.set(listener)
    try:
        yield
    finally:
        _CURRENT.reset(token)


class RenderSteps:
    """The steps of the renders a job plans, summed into its progress: ``plan`` each render before it starts (so
    the total is known from the first step), and pass what it returns as the render's ``on_progress``."""

    def __init__(self) -> None:
        self._renders: dict[Hashable, Progress] = {}

    def plan(self, key: Hashable, steps: int) -> Callable[[Progress], None]:
        self._renders[key] = Progress(0, steps)

        def moved(progress: Progress) -> None:
            self._renders[key] = progress
            done = sum(render.done for render in self._renders.values())
            total = sum(render.total for render in self._renders.values())
            report_progress(done / max(total, 1), {"steps_done": done, "steps": total})

        return moved


class StoredProgress:
    """A listener writing ``{"progress", ...detail}`` to the job's work folder, never backwards (a job that plans
    more work midway keeps its highest fraction), at most once every ``WRITE_EVERY_S`` and once more at ``close``."""

    def __init__(self, store: ObjectStore, key: str) -> None:
        self._store, self._key = store, work_prefix(key) + PROGRESS_NAME
        self._fraction = 0.0
        self._pending: dict[str, Any] | None = None
        self._written_at = -WRITE_EVERY_S
        self._writing: asyncio.Future | None = None
        self._closed = False

    def __call__(self, fraction: float, detail: dict[str, int]) -> None:
        if self._closed or fraction < self._fraction:
            return
        self._fraction = fraction
        self._pending = {"progress": round(fraction, 4), **detail}
        if self._writing is None:
            self._writing = asyncio.ensure_future(self._write())

    async def _write(self) -> None:
        while self._pending is not None:
            wait_s = self._written_at + WRITE_EVERY_S - time.monotonic()
            if wait_s > 0:
                await asyncio.sleep(wait_s)
                continue  # the latest report by then (none once closed)
            body, self._pending = json.dumps(self._pending).encode(), None
            self._written_at = time.monotonic()
            try:
                await asyncio.to_thread(self._store.put, self._key, body, content_type=JSON_TYPE)
            except Exception:  # progress is advice: a refused write must not fail the job
                logger.warning("the progress of %s could not be written", self._key, exc_info=True)
        self._writing = None

    async def close(self) -> None:
        """No more writes (the one under way ends first), then the progress deleted: the job's records say the
        rest."""
        self._closed, self._pending = True, None
        if self._writing is not None:
            await self._writing
        with contextlib.suppress(ObjectNotFound):
            await asyncio.to_thread(self._store.delete, self._key)


def read_progress(store: ObjectStore, key: str) -> tuple[float, dict[str, int]] | None:
    """The fraction done of the job on ``key`` while it runs and what was counted; None before its first report.
    Blocking."""
    try:
        stored = store.get(work_prefix(key) + PROGRESS_NAME, max_bytes=4096)
    except ObjectNotFound:
        return None
    found = json.loads(stored.data)
    fraction = float(found.pop("progress"))
    return fraction, {name: int(value) for name, value in found.items()}


def write_waiting(store: ObjectStore, key: str, code: str, message: str) -> None:
    """Why the job on ``key`` went back to the queue (its last attempts' failure). Blocking."""
    body = json.dumps({"code": code, "message": message}).encode()
    store.put(work_prefix(key) + WAITING_NAME, body, content_type=JSON_TYPE)


def clear_waiting(store: ObjectStore, key: str) -> None:
    """The job ended (or runs again): it waits for nothing. Blocking."""
    with contextlib.suppress(ObjectNotFound):
        store.delete(work_prefix(key) + WAITING_NAME)


def read_waiting(store: ObjectStore, key: str) -> dict[str, str] | None:
    """``{"code", "message"}`` of what the queued job on ``key`` waits for, or None. Blocking."""
    try:
        stored = store.get(work_prefix(key) + WAITING_NAME, max_bytes=16384)
    except ObjectNotFound:
        return None
    found = json.loads(stored.data)
    return {"code": str(found["code"]), "message": str(found["message"])}
