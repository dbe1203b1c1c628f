"""The runner's core (``BucketWorker``), without Ray: one object in → one result or one error record out, exactly once.

Every trigger ends in ``BucketWorker.process_object(route, key)``:

1. ``head`` the object (gone → nothing to do); read its records at the output: a result or error record naming this
   key and ETag means it is done (duplicate events and replays give one result);
2. params = route defaults + ``x-amz-meta-portrait-params``; read the object with the HTTP byte limit (the pixel
   limit applies when the job decodes it); run the job under ``job_timeout_s``;
3. write the result, then its ``.json``; a caller fault (``InputError``, an invalid key included) writes its error
   record instead (``records.RecordNames``: every key has one).

Every step of an attempt, reads and writes included, fails into one classification (``outcomes.classify``):
transient failures are retried with backoff, then left for the next scan with nothing written; a store's refusal, a
timeout and a bug are retried, then recorded (``access_denied``..., ``timeout``, ``internal_error``), so no object is
redone on every scan (delete the record to retry it). A semaphore bounds the objects in flight.

Triggers: ``submit(events)`` (the webhook: queued in ``PendingObjects``, bounded and deduplicated, drained by
``max_concurrency`` consumers), ``reconcile(route)`` (list the input in chunks of ``scan_chunk``, process what has no
record for its current ETag: at start-up, and periodically as the poller for stores without notifications), and
``SqsConsumer`` (``serve_app.runner.triggers.sqs``: S3 → SQS notifications).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from deployments.common.errors import InvalidParameter, StorageError
from deployments.common.params import JobParams
from serve_app.backend import Backend
from serve_app.jobs import JobContext, run_job
from serve_app.jobs.results import JobResult
from serve_app.runner.attempts import JobExecutor, ObjectAttempts
from serve_app.runner.folders import input_folder_missing
from serve_app.runner.leases import RUNNER_HOLDER, require_conditional_writes
from serve_app.runner.outcomes import DEFAULT_RETRY, ObjectOutcome, RetryPolicy, RouteState, Status, is_transient
from serve_app.runner.pending import KeyLocks, PendingObject, PendingObjects
from serve_app.runner.records import RecordNames, record_names
from serve_app.runner.routing import Route, RoutingTable
from serve_app.runner.triggers.events import ObjectEvent, created_events
from storage.base import ObjectInfo, ObjectStore, open_store

logger = logging.getLogger(__name__)

StoreOpener = Callable[..., ObjectStore]


def job_executor(backend: Backend, context: JobContext) -> JobExecutor:
    """Run jobs in-process against ``backend`` (the Serve handles, or ``in_process_backend``)."""

    async def execute(task: str, data: bytes, params: JobParams) -> JobResult:
        return await run_job(backend, task, data, params, context)

    return execute


class BucketWorker:
    """Processes objects of the routes in ``table``; per-instance state only (store clients, slots, done cache)."""

    def __init__(
        self,
        table: RoutingTable,
        execute: JobExecutor,
        context: JobContext,
        *,
        max_concurrency: int = 4,
        max_pending: int = 10_000,
        scan_chunk: int = 256,
        retry: RetryPolicy = DEFAULT_RETRY,
        job_timeout_s: float = 300.0,
        transient: Callable[[BaseException], bool] = is_transient,
        store_opener: StoreOpener = open_store,
        on_outcome: Callable[[ObjectOutcome], None] | None = None,
        locks: KeyLocks | None = None,
        holder: str = RUNNER_HOLDER,
    ) -> None:
        if max_concurrency < 1 or scan_chunk < 1:
            raise InvalidParameter(f"max_concurrency and scan_chunk must be at least 1, got {max_concurrency}")
        self.table = table
        self._on_outcome = on_outcome
        self._max_concurrency = max_concurrency
        self._scan_chunk = scan_chunk
        self._slots = asyncio.Semaphore(max_concurrency)
        self._stores = {
            route.name: (store_opener(route.input, route.store), store_opener(route.output, route.store))
            for route in table.routes
        }
        self.locks = locks or KeyLocks()  # hand them to the next worker (``reconfigure``)
        self._pending = PendingObjects(max_pending)
        self._consumers: set[asyncio.Task[None]] = set()
        self._attempts = ObjectAttempts(
            self._stores, execute, context, retry=retry, job_timeout_s=job_timeout_s, transient=transient, holder=holder
        )
        self._done: dict[tuple[str, str], tuple[str, RecordNames]] = {}  # (route, key) → ETag recorded, its names
        self.counts: dict[str, int] = {status.value: 0 for status in Status}
        self._states = {route.name: RouteState() for route in table.routes}

    async def require_claims(self) -> None:
        """``InvalidParameter`` for a route whose output store ignores conditional writes: claims rest on them."""
        for route in self.table.routes:
            await asyncio.to_thread(require_conditional_writes, self._stores[route.name][1], route.name)

    def route_states(self) -> dict[str, RouteState]:
        """Each route's last scan, backlog and last error (``/healthz`` shows them)."""
        return dict(self._states)

    def _note(self, route: str, **changes: Any) -> None:
        self._states[route] = replace(self._states[route], **changes)

    # Triggers -------------------------------------------------------------------------------------------------

    def submit(self, events: Iterable[ObjectEvent]) -> int:
        """Queue the created objects that match a route and return how many (route, object) pairs matched;
        ``PendingFull`` (503) when the queue cannot take them all (then none is queued)."""
        items = [
            PendingObject(match.route.name, match.key, event.etag)
            for event in created_events(list(events))
            for match in self.table.match(event.bucket, event.key)
        ]
        self._pending.offer(items)
        self._start_consumers()
        return len(items)

    def close(self) -> list[PendingObject]:
        """Stop taking queued work (what is in flight finishes); return what was still waiting, for ``adopt``."""
        return self._pending.close()

    def adopt(self, items: Iterable[PendingObject]) -> None:
        """Queue another worker's waiting objects (of routes this worker still has; start-up scans do the rest)."""
        names = {route.name for route in self.table.routes}
        self._pending.offer([item for item in items if item.route in names][: self._pending.max_pending])
        self._start_consumers()

    async def process_event(self, event: ObjectEvent) -> list[ObjectOutcome]:
        """Process one event and wait for its outcomes (the SQS consumer deletes a message only after them)."""
        if not event.is_created:
            return []
        matches = self.table.match(event.bucket, event.key)
        return list(await asyncio.gather(*(self.process_object(m.route, m.key, event.etag) for m in matches)))

    async def reconcile(
        self, route: Route, *, on_listed: Callable[[int], None] | None = None, keep_outcomes: bool = True
    ) -> list[ObjectOutcome]:
        """List the route's input chunk by chunk and process every object without a record for its current ETag.

        ``on_listed(n)`` after each chunk: ``n`` more objects to check."""
        source, output = self._stores[route.name]
        listed, outcomes = 0, []
        try:
            if input_folder_missing(route):  # unmounted or deleted since start-up: say so instead of finding nothing
                raise StorageError(f"input folder {route.input} does not exist", details={"route": route.name})
            listing = await asyncio.to_thread(source.list)
            # An object this worker recorded for its current ETag is skipped while its record is still there
            # (deleting a record asks for a retry): one listing of the output, keeping only those records' names.
            present = await asyncio.to_thread(self._present_records, route, output)
            while chunk := await asyncio.to_thread(_next_chunk, listing, route, self._scan_chunk):
                listed += len(chunk)
                todo = [info for info in chunk if not self._known_done(route, info, present)]
                if on_listed is not None:
                    on_listed(len(todo))
                done = await asyncio.gather(*(self._isolated(route, info.key, info.etag) for info in todo))
                if keep_outcomes:
                    outcomes.extend(done)
        except Exception as exc:
            self._note(route.name, scan_failing=True, last_error=f"scan failed: {exc!r}", last_error_at=_now())
            raise
        self._note(route.name, last_scan_at=_now(), listed=listed, scan_failing=False)
        logger.log(logging.INFO if outcomes else logging.DEBUG, "reconcile %s: %d objects listed", route.name, listed)
        return outcomes

    async def reconcile_all(self) -> list[ObjectOutcome]:
        outcomes: list[ObjectOutcome] = []
        for route in self.table.routes:
            outcomes.extend(await self.reconcile(route))
        return outcomes

    async def poll_forever(self, interval_s: float) -> None:
        """Reconcile every route once (uploads made while we were down), then the polled routes every interval.

        A failed scan is logged and tried again next interval: the poller is the safety net and must keep running."""
        reconciled: set[str] = set()
        while True:
            for route in self.table.routes:
                if route.name in reconciled and not route.poll:
                    continue
                try:
                    await self.reconcile(route, keep_outcomes=False)
                except Exception:
                    logger.exception(
                        "scan of route %s (%s) failed; next try in %.0f s", route.name, route.input, interval_s
                    )
                else:
                    reconciled.add(route.name)
            await asyncio.sleep(interval_s)

    async def drain(self) -> None:
        """Wait for the queued work started by ``submit``."""
        await self._pending.join()

    def cancel(self) -> None:
        """Drop the queue and stop the consumers (a crash, in tests)."""
        self._pending.close()
        for task in list(self._consumers):
            task.cancel()

    @property
    def in_flight(self) -> int:
        """Queued objects: waiting or being processed."""
        return len(self._pending)

    def _start_consumers(self) -> None:
        while len(self._consumers) < self._max_concurrency:
            task = asyncio.get_running_loop().create_task(self._consume(), name="bucket-consumer")
            self._consumers.add(task)
            task.add_done_callback(self._consumers.discard)

    async def _consume(self) -> None:
        while (item := await self._pending.take()) is not None:
            try:
                await self._isolated(self.table.route(item.route), item.key, item.etag)
            finally:
                self._pending.done(item)

    def _present_records(self, route: Route, output: ObjectStore) -> set[str]:
        wanted = {
            name
            for (route_name, _), (_, names) in self._done.items()
            if route_name == route.name
            for name in (names.metadata, names.error)
            if name
        }
        return {info.key for info in output.list() if info.key in wanted} if wanted else set()

    def _known_done(self, route: Route, info: ObjectInfo, present: set[str]) -> bool:
        etag, names = self._done.get((route.name, info.key), (None, None))
        return names is not None and etag == info.etag and bool({names.metadata, names.error} & present)

    # One object -----------------------------------------------------------------------------------------------

    async def _isolated(self, route: Route, key: str, etag: str | None) -> ObjectOutcome:
        """``process_object`` that never raises: one object's surprise cannot end a scan or a consumer."""
        try:
            return await self.process_object(route, key, etag)
        except Exception as exc:
            logger.exception("%s: %r could not be processed", route.name, key)
            self._note(route.name, last_error=f"{key}: {exc!r}", last_error_at=_now())
            outcome = ObjectOutcome(route.name, key, Status.DEFERRED, code="internal_error")
            self.counts[outcome.status.value] += 1
            if self._on_outcome is not None:
                self._on_outcome(outcome)
            return outcome

    async def process_object(self, route: Route, key: str, etag: str | None = None) -> ObjectOutcome:
        """Exactly one result or error record for the object's current version, or DEFERRED with nothing written."""
        names = record_names(key, within=route.output.prefix)
        # One attempt per result name at a time: a duplicate event waits, then finds the record and skips (and
        # ``a.jpg``/``a.png``, which share a result name, cannot both claim it).
        self._note(route.name, backlog=self._states[route.name].backlog + 1)
        try:
            async with self.locks.hold((str(route.output), names.metadata or names.error)), self._slots:
                outcome = await self._attempts.run(route, names, etag)
        finally:
            self._note(route.name, backlog=self._states[route.name].backlog - 1)
        self.counts[outcome.status.value] += 1
        if outcome.status is Status.DEFERRED or outcome.code in ("internal_error", "timeout"):
            problem = f"{key}: {outcome.status.value} ({outcome.code}) after {outcome.attempts} attempts"
            self._note(route.name, last_error=problem, last_error_at=_now())
        if outcome.status in (Status.DONE, Status.SKIPPED, Status.FAILED) and outcome.etag:
            self._done[(route.name, key)] = (outcome.etag, names)
        if self._on_outcome is not None:
            self._on_outcome(outcome)
        return outcome


def _next_chunk(listing: Iterator[ObjectInfo], route: Route, size: int) -> list[ObjectInfo]:
    """Up to ``size`` more of the route's objects from a listing (run in a thread: listing pages are I/O)."""
    return list(itertools.islice((info for info in listing if route.accepts(info.key)), size))


def _now() -> datetime:
    return datetime.now(UTC)
