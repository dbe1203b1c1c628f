"""The asynchronous jobs' side of the runner: one internal route per task over the jobs store, admission to a bounded
queue, what happens when a job ends (callback, input deleted), and the retention sweep. No Ray. The HTTP side
(``serve_app.jobs_api``) stores a job and hands it to ``enqueue``; nothing here imports it.

A job's work is the worker's, as for a bucket route: the same retries, the same exactly-once records
(``serve_app.runner.worker``).
``observe`` sees every outcome the worker reports; a job's end (``done``, ``failed``, or ``skipped`` when a restarted
runner finds a job recorded whose input is still there) starts ``finish``: the signed callback until delivered or
given up, then the input is deleted. The input stays until then, so a runner that restarts mid-callback finds the job
on its first scan and calls back again: at least once.

Endings are held by the runner's ``CallbackQueue`` (bounded: ``callback_concurrency`` POSTs at once,
``callback_held_max`` endings in memory). An ending that finds it full stays in the store (input and state, as after a
restart) and ``_refill`` takes it up, from a listing of the inputs, as soon as there is room.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterable
from datetime import UTC, datetime

from deployments.common.errors import Overloaded
from serve_app.auth import KeyRing
from serve_app.runner.callback_queue import CallbackQueue, next_chunk
from serve_app.runner.callbacks import KEY_ID_HEADER, Poster, callback_poster, deliver
from serve_app.runner.jobs_config import JobsConfig, within
from serve_app.runner.jobs_layout import JobRef, expiry_of, job_of_route, route_name
from serve_app.runner.jobs_records import CallbackState, JobView, job_json
from serve_app.runner.jobs_store import JobStore
from serve_app.runner.outcomes import ObjectOutcome, Status
from serve_app.runner.routing import BucketRoute
from serve_app.runner.triggers.events import ObjectEvent
from serve_app.runner.worker import BucketWorker
from storage.keys import safe_join

logger = logging.getLogger(__name__)

SOURCE = "jobs"  # the jobs' endings in the callback queue


def job_routes(config: JobsConfig, store: JobStore, tasks: Iterable[str]) -> list[BucketRoute]:
    """One internal route per task: ``in/<task>`` → ``out/<task>`` of the jobs store, polled (the safety net)."""
    local = store.location.scheme == "file"
    return [
        BucketRoute(
            name=route_name(task),
            input=within(store.location, "in", task),
            output=within(store.location, "out", task),
            task=task,
            suffixes=(),
            poll=True,
            event_bucket=f"portrait-jobs-{task}" if local else None,
            store=config.s3,
        )
        for task in tasks
    ]


class JobsRunner:
    def __init__(
        self,
        config: JobsConfig,
        store: JobStore,
        keys: KeyRing,
        *,
        post: Poster | None = None,
        queue: CallbackQueue | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self._keys = keys
        self._app_secret = config.signing_secret()  # read once, here: this process's environment and files
        self._post = post or callback_poster(config)
        # the runner's, shared with the bucket routes' callbacks
        self._queue = queue if queue is not None else CallbackQueue.of(config)
        self._worker: BucketWorker | None = None
        self._open: set[JobRef] = set()  # accepted here and not yet ended: the queue max_queued bounds
        self._finishing: set[JobRef] = set()  # ended, and held by the callback queue

    def attach(self, worker: BucketWorker) -> None:
        """The worker whose routing table holds ``job_routes`` (set again when the runner is reconfigured)."""
        self._worker = worker

    @property
    def queued(self) -> int:
        return len(self._open)

    @property
    def settled(self) -> bool:
        """No job waits for the worker or for its ending (callback, input deletion) here, or in the store for room."""
        return not self._open and not self._finishing and not self._queue.waiting(SOURCE)

    # Admission ----------------------------------------------------------------------------------------------------

    def share(self) -> int:
        """How many of the queue's ``max_queued`` one owner may hold: ``max_queued_per_key``, else with keys a quarter
        (one key filling its share leaves room for the others), else all (without keys there is one owner)."""
        limit = self.config.max_queued
        if self.config.max_queued_per_key is not None:
            return min(limit, self.config.max_queued_per_key)
        return max(1, limit // 4) if len(self._keys) else limit

    def enqueue(self, task: str, ref: JobRef) -> None:
        """Hand a stored job to the worker; ``Overloaded`` (503) when the owner holds its ``share`` of the queue, or
        ``max_queued`` jobs are waiting."""
        if self._worker is None or len(self._open) >= self.config.max_queued:
            raise Overloaded(
                f"the jobs queue is full ({self.config.max_queued} jobs waiting); retry later",
                details={"retry_after_s": 5},
            )
        share = self.share()
        if sum(1 for held in self._open if held.owner == ref.owner) >= share:
            raise Overloaded(
                f"key {ref.owner!r} has {share} jobs waiting, its share of the jobs queue; retry later",
                details={"retry_after_s": 5},
            )
        route = self._worker.table.route(route_name(task))
        event = ObjectEvent(route.event_bucket, safe_join(route.input.prefix, ref.key), "s3:ObjectCreated:Put")
        self._worker.submit([event])
        self._open.add(ref)

    # Endings ------------------------------------------------------------------------------------------------------

    def observe(self, outcome: ObjectOutcome) -> None:
        """Every outcome of the worker (bucket routes' too: ignored here)."""
        found = job_of_route(outcome.route, outcome.key)
        if found is None or outcome.status is Status.DEFERRED:  # deferred: the next scan tries the job again
            return
        task, ref = found
        self._open.discard(ref)
        self._end(task, ref)

    def _end(self, task: str, ref: JobRef) -> bool:
        """Start the job's ending unless it is under way; False when the callback queue is full: the job waits in the
        store (its input stays) and ``_refill`` offers it again."""
        if ref in self._finishing:
            return True
        if not self._queue.hold(f"job {ref.key}", lambda: self._finish(task, ref), source=SOURCE, refill=self._refill):
            return False
        self._finishing.add(ref)
        return True

    async def _refill(self) -> None:
        """Offer again the endings the queue had no room for: every job whose input is still in the store and which
        has ended (a job still queued or running is the worker's), until the queue is full again."""
        inputs = self.store.inputs()
        while chunk := await next_chunk(inputs):
            for task, ref in chunk:
                if ref in self._finishing or ref in self._open:
                    continue
                view = await asyncio.to_thread(self.store.view, ref)
                if view is not None and view.status in ("queued", "running"):
                    continue
                if not self._end(task, ref):
                    return

    async def _finish(self, task: str, ref: JobRef) -> None:
        try:
            view = await asyncio.to_thread(self.store.view, ref)
            if view is None or view.state.status == "cancelled":  # deleted or cancelled meanwhile: drop what is left
                await asyncio.to_thread(self.store.delete_data, ref, task)
                return
            if view.status not in ("succeeded", "failed"):
                return  # the input went away unprocessed (cancelled before the record was read)
            if view.record.callback_url is not None and not view.state.callback.settled:
                await self._call_back(view)
            await asyncio.to_thread(self.store.delete_input, ref, task)
        finally:
            self._finishing.discard(ref)

    async def _call_back(self, view: JobView) -> None:
        ref = JobRef(view.record.owner, view.record.id)
        body = _body(view)
        state = view.state
        finished_at = view.result.finished_at if view.result else view.error.failed_at if view.error else _now()

        async def note(attempt: int, error: str | None) -> None:
            nonlocal state
            callback = CallbackState(
                attempts=state.callback.attempts + 1,
                delivered_at=_now() if error is None else None,
                last_error=error,
            )
            state = state.model_copy(update={"callback": callback, "updated_at": _now()})
            await asyncio.to_thread(self.store.put_state, ref, state)

        secret = self.callback_secret(view.record.owner)
        if secret is None:  # the secret was removed from the config after the job was accepted
            unsent = CallbackState(given_up_at=_now(), last_error="no callback secret is configured for this key")
            await asyncio.to_thread(self.store.put_state, ref, state.model_copy(update={"callback": unsent}))
            return
        delivery = await deliver(
            view.record.callback_url or "",
            body,
            secret,
            config=self.config,
            deadline_s=finished_at.timestamp() + self.config.callback_retry_s,
            timeout_s=self.config.callback_timeout_s,
            post=self._post,
            headers={KEY_ID_HEADER: view.record.owner},
            slots=self._queue.slots,
            on_attempt=note,
        )
        if not delivery.delivered:
            logger.warning(
                "job %s: callback given up after %d attempts (%s)", ref.id, delivery.attempts, delivery.last_error
            )
            given_up = state.callback.model_copy(update={"given_up_at": _now()})
            await asyncio.to_thread(self.store.put_state, ref, state.model_copy(update={"callback": given_up}))

    def callback_secret(self, owner: str) -> str | None:
        """The key's own callback secret, else the app's (``PORTRAIT_CALLBACK_SECRET``, ``callback_secret_file``)."""
        key = self._keys.by_id(owner)
        secret = key.callback_secret if key is not None and key.callback_secret else self._app_secret
        return secret.get_secret_value() if secret else None

    # Retention ----------------------------------------------------------------------------------------------------

    def sweep(self, now: datetime) -> int:
        """Delete every job past its expiry (input, outputs, records); returns the objects deleted. Blocking."""
        deleted = 0
        for ref in list(self.store.refs()):
            if expiry_of(ref.id) <= now:
                deleted += self.store.purge(ref)
        return deleted

    async def drain(self) -> None:
        """Wait for the endings in progress, and those taken up from the store meanwhile (tests)."""
        await self._queue.drain()


def _body(view: JobView) -> bytes:
    """What ``GET /v1/jobs/{id}`` answers, plus the key it belongs to and the URL it is sent to: both signed, so a
    receiver can tell a callback meant for another key or another receiver."""
    body = {**job_json(view.to_out()), "key_id": view.record.owner, "callback_url": view.record.callback_url}
    return json.dumps(body, separators=(",", ":")).encode("utf-8")


def _now() -> datetime:
    return datetime.now(UTC)
