"""The bucket runner's core, without Ray: one object in → one result or one error record out, exactly once.

Every trigger ends in ``BucketWorker.process_object(route, key)``:

1. ``head`` the object (gone → nothing to do); read its records at the output: a result or error record naming this
   key and ETag means it is done (duplicate events and replays give one result);
2. params = route defaults + ``x-amz-meta-portrait-params``; read the object with the HTTP byte limit (the pixel
   limit applies when the job decodes it); run the job;
3. write the result, then its ``.json``; a caller fault (``InputError``) writes ``_errors/<key>.json`` instead.

Transient failures (store unavailable, service errors, replica death, timeouts) are retried with exponential backoff,
then left for the reconciler: no record is written, so the next scan (or the redelivered SQS message) picks the object
up again. A semaphore bounds the objects in flight: a burst of events waits instead of being dropped.

A bug (``InternalError`` or any unexpected exception) is retried the same way, then recorded as ``internal_error``
in ``_errors/`` so one poisoned object is not redone on every scan (delete the record to retry it).

Triggers: ``submit(events)`` (the webhook; returns at once, work continues in background tasks), ``reconcile(route)``
(list the input, process what has no record for its current ETag: at start-up, and periodically as the poller for
stores without notifications), and ``SqsConsumer`` (``serve_app.bucket.sqs``: S3 → SQS notifications).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from deployments.common.errors import (
    InputError,
    InternalError,
    InvalidParameter,
    PortraitError,
    StorageError,
)
from deployments.common.params import JobParams
from serve_app.backend import Backend
from serve_app.bucket.events import ObjectEvent, created_events
from serve_app.bucket.folders import input_folder_missing
from serve_app.bucket.outcomes import DEFAULT_RETRY, ObjectOutcome, RetryPolicy, RouteState, Status, is_transient
from serve_app.bucket.records import (
    ErrorRecord,
    ResultRecord,
    SourceOut,
    describe_source,
    error_detail,
    find_records,
    is_recorded,
    output_key,
    sheet_key,
    write_error,
    write_result,
)
from serve_app.bucket.routing import Route, RoutingTable, object_params
from serve_app.jobs import JobContext, run_job
from serve_app.jobs.results import JobResult
from serve_app.schemas import ErrorDetail
from storage.base import ObjectStore, open_store
from storage.errors import ObjectNotFound
from storage.keys import error_key, metadata_key

logger = logging.getLogger(__name__)

JobExecutor = Callable[[str, bytes, JobParams], Awaitable[JobResult]]
StoreOpener = Callable[..., ObjectStore]


def job_executor(backend: Backend, context: JobContext) -> JobExecutor:
    """Run jobs in-process against ``backend`` (the Serve handles, or ``LocalBackend``)."""

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
        retry: RetryPolicy = DEFAULT_RETRY,
        job_timeout_s: float = 300.0,
        transient: Callable[[BaseException], bool] = is_transient,
        store_opener: StoreOpener = open_store,
        on_outcome: Callable[[ObjectOutcome], None] | None = None,
    ) -> None:
        if max_concurrency < 1:
            raise InvalidParameter(f"max_concurrency must be at least 1, got {max_concurrency}")
        self.table = table
        self._execute = execute
        self._context = context
        self._retry = retry
        self._job_timeout_s = job_timeout_s
        self._transient = transient
        self._on_outcome = on_outcome
        self._slots = asyncio.Semaphore(max_concurrency)
        self._stores = {
            route.name: (store_opener(route.input, route.store), store_opener(route.output, route.store))
            for route in table.routes
        }
        self._key_locks: dict[tuple[str, str], tuple[asyncio.Lock, int]] = {}  # lock, users
        self._done: dict[tuple[str, str], str] = {}  # (route, key) → ETag known to have a record
        self._background: set[asyncio.Task[Any]] = set()
        self.counts: dict[str, int] = {status.value: 0 for status in Status}
        self._states = {route.name: RouteState() for route in table.routes}

    def route_states(self) -> dict[str, RouteState]:
        """Each route's last scan, backlog and last error (``/healthz`` shows them)."""
        return dict(self._states)

    def _note(self, route: str, **changes: Any) -> None:
        self._states[route] = replace(self._states[route], **changes)

    # Triggers -------------------------------------------------------------------------------------------------

    def submit(self, events: Iterable[ObjectEvent]) -> int:
        """Start processing the created objects that match a route; return how many (route, object) pairs."""
        accepted = 0
        for event in created_events(list(events)):
            for match in self.table.match(event.bucket, event.key):
                self._spawn(self.process_object(match.route, match.key))
                accepted += 1
        return accepted

    async def process_event(self, event: ObjectEvent) -> list[ObjectOutcome]:
        """Process one event and wait for its outcomes (the SQS consumer deletes a message only after them)."""
        if not event.is_created:
            return []
        matches = self.table.match(event.bucket, event.key)
        return list(await asyncio.gather(*(self.process_object(m.route, m.key) for m in matches)))

    async def reconcile(self, route: Route, *, on_listed: Callable[[int], None] | None = None) -> list[ObjectOutcome]:
        """List the route's input and process every object without a record for its current ETag."""
        source, output = self._stores[route.name]
        try:
            if input_folder_missing(route):  # unmounted or deleted since start-up: say so instead of finding nothing
                raise StorageError(f"input folder {route.input} does not exist", details={"route": route.name})
            listed = await asyncio.to_thread(lambda: [info for info in source.list() if route.accepts(info.key)])
            # One listing of the output instead of two reads per object: an object this worker already recorded for
            # its current ETag is skipped while its record is still there (deleting a record asks for a retry).
            records = await asyncio.to_thread(lambda: {info.key for info in output.list()})
        except Exception as exc:
            self._note(route.name, scan_failing=True, last_error=f"scan failed: {exc!r}", last_error_at=_now())
            raise
        self._note(route.name, last_scan_at=_now(), listed=len(listed), scan_failing=False)
        todo = [
            info
            for info in listed
            if self._done.get((route.name, info.key)) != info.etag
            or not {metadata_key("", info.key), error_key("", info.key)} & records
        ]
        logger.log(
            logging.INFO if todo else logging.DEBUG,
            "reconcile %s: %d objects listed, %d to check",
            route.name,
            len(listed),
            len(todo),
        )
        if on_listed is not None:
            on_listed(len(todo))
        return list(await asyncio.gather(*(self.process_object(route, info.key) for info in todo)))

    async def reconcile_all(self, *, polled_only: bool = False) -> list[ObjectOutcome]:
        outcomes: list[ObjectOutcome] = []
        for route in self.table.routes:
            if route.poll or not polled_only:
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
                    await self.reconcile(route)
                except Exception:
                    logger.exception(
                        "scan of route %s (%s) failed; next try in %.0f s", route.name, route.input, interval_s
                    )
                else:
                    reconciled.add(route.name)
            await asyncio.sleep(interval_s)

    async def drain(self) -> None:
        """Wait for the background work started by ``submit``."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

    def cancel(self) -> None:
        for task in list(self._background):
            task.cancel()

    @property
    def in_flight(self) -> int:
        return len(self._background)

    # One object -----------------------------------------------------------------------------------------------

    async def process_object(self, route: Route, key: str) -> ObjectOutcome:
        """Exactly one result or error record for the object's current version, or DEFERRED with nothing written."""
        # One attempt per result name at a time: a duplicate event waits, then finds the record and skips (and
        # ``a.jpg``/``a.png``, which share a result name, cannot both claim it).
        name = (route.name, metadata_key("", key))
        lock, users = self._key_locks.get(name, (asyncio.Lock(), 0))
        self._key_locks[name] = (lock, users + 1)
        self._note(route.name, backlog=self._states[route.name].backlog + 1)
        try:
            async with lock, self._slots:
                outcome = await self._with_retries(route, key)
        finally:
            self._note(route.name, backlog=self._states[route.name].backlog - 1)
            lock, users = self._key_locks[name]
            if users == 1:
                del self._key_locks[name]
            else:
                self._key_locks[name] = (lock, users - 1)
        self.counts[outcome.status.value] += 1
        if outcome.status is Status.DEFERRED or outcome.code == "internal_error":
            problem = f"{key}: {outcome.status.value} ({outcome.code}) after {outcome.attempts} attempts"
            self._note(route.name, last_error=problem, last_error_at=_now())
        if outcome.status in (Status.DONE, Status.SKIPPED, Status.FAILED) and outcome.etag:
            self._done[(route.name, key)] = outcome.etag
        if self._on_outcome is not None:
            self._on_outcome(outcome)
        return outcome

    async def _with_retries(self, route: Route, key: str) -> ObjectOutcome:
        """Retry transient failures and bugs alike; then defer the transient ones and record the bug."""
        for attempt in range(1, self._retry.max_attempts + 1):
            try:
                return await self._attempt(route, key, attempt)
            except _Failure as failure:
                exc = failure.__cause__
                transient = self._transient(exc)
                code = exc.code if isinstance(exc, PortraitError) and transient else "internal_error"
                if attempt == self._retry.max_attempts:
                    if not transient:
                        return await self._record_bug(route, key, failure.source, exc, attempt)
                    logger.warning(
                        "%s: %r still failing after %d attempts (%s: %s); left for the reconciler",
                        route.name,
                        key,
                        attempt,
                        code,
                        exc,
                    )
                    return ObjectOutcome(route.name, key, Status.DEFERRED, code=code, attempts=attempt)
                delay_s = self._retry.delay_s(attempt)
                logger.info(
                    "%s: %r attempt %d failed (%s: %s); retrying in %.2f s",
                    route.name,
                    key,
                    attempt,
                    code,
                    exc,
                    delay_s,
                )
                await asyncio.sleep(delay_s)
        raise InternalError("unreachable: RetryPolicy.max_attempts >= 1")

    async def _record_bug(
        self, route: Route, key: str, source: SourceOut | None, exc: BaseException, attempts: int
    ) -> ObjectOutcome:
        """Our bug, not the caller's fault: the traceback to the log, ``internal_error`` to the output."""
        logger.error("%s: %r failed after %d attempts", route.name, key, attempts, exc_info=exc)
        if source is None:  # failed before the object could be read: nothing to name in a record
            return ObjectOutcome(route.name, key, Status.DEFERRED, code="internal_error", attempts=attempts)
        message = exc.message if isinstance(exc, PortraitError) else f"{type(exc).__name__}: {exc}"
        failure = ErrorRecord(
            source=source,
            route=route.name,
            task=route.task,
            failed_at=_now(),
            error=ErrorDetail(code="internal_error", message=message),
        )
        _, output_store = self._stores[route.name]
        await asyncio.to_thread(write_error, output_store, key, failure)
        return ObjectOutcome(route.name, key, Status.FAILED, etag=source.etag, code="internal_error", attempts=attempts)

    async def _attempt(self, route: Route, key: str, attempt: int) -> ObjectOutcome:
        """One try; a failure that is not the caller's fault leaves as ``_Failure`` (carrying what was read)."""
        source_store, output_store = self._stores[route.name]
        try:
            info = await asyncio.to_thread(source_store.head, key)
        except ObjectNotFound:
            return ObjectOutcome(route.name, key, Status.GONE, attempts=attempt)
        except Exception as exc:
            raise _Failure(None) from exc
        source = describe_source(route.input, info)
        records = await asyncio.to_thread(find_records, output_store, key)
        try:
            if is_recorded(records, source):
                return ObjectOutcome(route.name, key, Status.SKIPPED, etag=info.etag, attempts=attempt)
            params = object_params(route, info.user_metadata, self._context)
            stored = await asyncio.to_thread(source_store.get, key, max_bytes=self._context.limits.max_bytes)
            source = describe_source(route.input, stored.info)  # the version actually read
            result = await asyncio.wait_for(self._execute(route.task, stored.data, params), self._job_timeout_s)
        except InputError as exc:
            failure = ErrorRecord(
                source=source, route=route.name, task=route.task, error=error_detail(exc), failed_at=_now()
            )
            await asyncio.to_thread(write_error, output_store, key, failure)
            logger.info("%s: %r refused (%s: %s)", route.name, key, exc.code, exc.message)
            return ObjectOutcome(route.name, key, Status.FAILED, etag=source.etag, code=exc.code, attempts=attempt)
        except Exception as exc:
            raise _Failure(source) from exc
        finished_at = _now()
        lag_s = (finished_at - source.last_modified).total_seconds()
        record = ResultRecord(
            source=source,
            route=route.name,
            task=route.task,
            params=params.model_dump(by_alias=True),
            result_key=output_key(key, result),
            sheet_key=sheet_key(key, result),
            meta=result.meta,
            uploaded_at=source.last_modified,
            finished_at=finished_at,
            event_lag_s=round(lag_s, 3),
            attempts=attempt,
        )
        await asyncio.to_thread(write_result, output_store, key, result, record)
        return ObjectOutcome(route.name, key, Status.DONE, etag=source.etag, attempts=attempt, lag_s=lag_s)

    def _spawn(self, work: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("bucket work failed", exc_info=task.exception())


class _Failure(Exception):
    """An attempt failed on our side; ``__cause__`` is why, ``source`` the object version it had read (if any)."""

    def __init__(self, source: SourceOut | None) -> None:
        super().__init__("attempt failed")
        self.source = source


def _now() -> datetime:
    return datetime.now(UTC)
