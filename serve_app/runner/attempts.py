"""One object of one route to exactly one record: the attempts, their classification and retries. No Ray.

``ObjectAttempts.run`` is what ``BucketWorker.process_object`` calls once it holds the object's lock and a slot; it
reads and writes only through the route's stores and the records of ``serve_app.runner.records``, so any trigger
(the bucket runner, the backfill CLI, a jobs store) gets the same outcome for the same object. Every step of an
attempt (the HEAD, reading records, reading the object, the job, writing the result or the error record) fails into
``outcomes.classify``.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from deployments.common.errors import InputError, InternalError, PortraitError
from deployments.common.params import JobParams
from serve_app.jobs import JobContext
from serve_app.jobs.deadline import within_deadline
from serve_app.jobs.progress import StoredProgress, clear_waiting, reporting_to, write_waiting
from serve_app.jobs.results import JobResult
from serve_app.jobs.video import StoreChunkStore, VideoInput, read_object, video_deadline_factor
from serve_app.runner.leases import RUNNER_HOLDER, Leases
from serve_app.runner.outcomes import (
    DEFAULT_RETRY,
    Fault,
    ObjectOutcome,
    RetryPolicy,
    Status,
    Strikes,
    classify,
    failure_code,
    is_transient,
)
from serve_app.runner.records import (
    ErrorRecord,
    RecordNames,
    ResultRecord,
    SourceOut,
    attachments_key,
    companion_key,
    describe_source,
    error_detail,
    find_records,
    is_recorded,
    output_key,
    unread_source,
    write_error,
    write_result,
)
from serve_app.runner.routing import Route, object_params
from serve_app.schemas import ErrorDetail
from storage.base import ObjectStore
from storage.errors import ObjectNotFound

logger = logging.getLogger(__name__)

LEASE_MARGIN_S = 60.0  # a claim outlives the job timeout by this much (stage threads finishing, the result upload)

JobExecutor = Callable[[str, bytes | VideoInput, JobParams], Awaitable[JobResult]]


@dataclass
class _Seen:
    """What the attempts at one object learned: the version last described (the error record names it)."""

    source: SourceOut
    lag_s: float | None = None  # upload → result written, once written


class ObjectAttempts:
    """Runs the attempts at single objects; holds the failure counts (``Strikes``) across scans."""

    def __init__(
        self,
        stores: Mapping[str, tuple[ObjectStore, ObjectStore]],
        execute: JobExecutor,
        context: JobContext,
        *,
        retry: RetryPolicy = DEFAULT_RETRY,
        job_timeout_s: float = 300.0,
        transient: Callable[[BaseException], bool] = is_transient,
        holder: str = RUNNER_HOLDER,
    ) -> None:
        self._stores = stores
        self._execute = execute
        self._context = context
        self._retry = retry
        self._job_timeout_s = job_timeout_s
        self._transient = transient
        self._strikes = Strikes()
        self._leases = Leases(ttl_s=job_timeout_s + LEASE_MARGIN_S, holder=holder)

    async def run(self, route: Route, names: RecordNames, etag: str | None) -> ObjectOutcome:
        """Retry every failure with backoff; then defer the transient ones and record the others.

        ``etag``: what an event or a listing said, named by the error record if the store refuses even a HEAD."""
        return await self._with_retries(route, names, _Seen(unread_source(route.input, names.key, etag)))

    async def _with_retries(self, route: Route, names: RecordNames, seen: _Seen) -> ObjectOutcome:
        key = names.key
        for attempt in range(1, self._retry.max_attempts + 1):
            try:
                return await self._attempt(route, names, attempt, seen)
            except Exception as exc:
                fault = classify(exc, self._transient)
                code = failure_code(exc, fault)
                if fault is not Fault.TRANSIENT:
                    strikes = self._strikes.add(route.name, key, seen.source.etag)
                    if strikes >= self._retry.max_attempts:
                        return await self._record_failure(route, names, seen.source, exc, fault, attempt)
                if attempt == self._retry.max_attempts:
                    logger.warning(
                        "%s: %r still failing after %d attempts (%s: %s); left for the next scan",
                        route.name,
                        key,
                        attempt,
                        code,
                        exc,
                    )
                    await self._note_waiting(route, key, code, exc)
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

    async def _note_waiting(self, route: Route, key: str, code: str, exc: BaseException) -> None:
        """Why the object waits for the next scan, where ``GET /v1/jobs/{id}`` shows it (``waiting``)."""
        message = exc.message if isinstance(exc, PortraitError) else f"{type(exc).__name__}: {exc}"
        try:
            await asyncio.to_thread(write_waiting, self._stores[route.name][1], key, code, message)
        except Exception:  # advice only: the object is retried at the next scan all the same
            logger.warning("%s: why %r waits could not be written", route.name, key, exc_info=True)

    async def _record_failure(
        self, route: Route, names: RecordNames, source: SourceOut, exc: BaseException, fault: Fault, attempts: int
    ) -> ObjectOutcome:
        """A failure that retrying does not cure: its error record, so scans do not redo the object forever."""
        code = failure_code(exc, fault)
        self._strikes.clear(route.name, names.key, source.etag)
        if fault is Fault.BUG:
            logger.error("%s: %r failed after %d attempts", route.name, names.key, attempts, exc_info=exc)
        else:
            logger.warning("%s: %r failed after %d attempts (%s: %s)", route.name, names.key, attempts, code, exc)
        message = exc.message if isinstance(exc, PortraitError) else f"{type(exc).__name__}: {exc}"
        detail = ErrorDetail(code=code, message=message)
        try:
            await self._write_error(route, names, source, detail)
        except Exception:  # the output refuses too: nothing more to do here; the next scan tries again
            logger.exception("%s: the error record of %r could not be written", route.name, names.key)
        return ObjectOutcome(route.name, names.key, Status.FAILED, etag=source.etag, code=code, attempts=attempts)

    async def _write_error(self, route: Route, names: RecordNames, source: SourceOut, error: ErrorDetail) -> None:
        record = ErrorRecord(source=source, route=route.name, task=route.task, error=error, failed_at=_now())
        await asyncio.to_thread(write_error, self._stores[route.name][1], names, record)

    async def _attempt(self, route: Route, names: RecordNames, attempt: int, seen: _Seen) -> ObjectOutcome:
        """One try; every failure that is not the caller's fault leaves as an exception for ``_with_retries``."""
        source_store, output_store = self._stores[route.name]
        key = names.key
        try:
            info = await asyncio.to_thread(source_store.head, key)
            seen.source = describe_source(route.input, info)
            if is_recorded(await asyncio.to_thread(find_records, output_store, names), seen.source):
                return ObjectOutcome(route.name, key, Status.SKIPPED, etag=info.etag, attempts=attempt)
            names.require_metadata()
            claim = await asyncio.to_thread(self._leases.claim, output_store, names.lease)
            if claim is None:
                return ObjectOutcome(route.name, key, Status.DEFERRED, code="in_progress", attempts=attempt)
            try:
                await self._run(route, names, info.user_metadata, attempt, seen)
            except InputError as exc:  # recorded while the claim is held
                return await self._refuse(route, names, seen.source, exc, attempt)
            finally:
                await asyncio.to_thread(self._leases.release, output_store, names.lease, claim)
        except ObjectNotFound:
            return ObjectOutcome(route.name, key, Status.GONE, attempts=attempt)
        except InputError as exc:
            return await self._refuse(route, names, seen.source, exc, attempt)
        self._strikes.clear(route.name, key, seen.source.etag)
        return ObjectOutcome(route.name, key, Status.DONE, etag=seen.source.etag, attempts=attempt, lag_s=seen.lag_s)

    async def _refuse(
        self, route: Route, names: RecordNames, source: SourceOut, exc: InputError, attempt: int
    ) -> ObjectOutcome:
        """The caller's fault: its error record at once, not retried."""
        await self._write_error(route, names, source, error_detail(exc))
        logger.info("%s: %r refused (%s: %s)", route.name, names.key, exc.code, exc.message)
        self._strikes.clear(route.name, names.key, source.etag)
        return ObjectOutcome(route.name, names.key, Status.FAILED, etag=source.etag, code=exc.code, attempts=attempt)

    async def _run(
        self, route: Route, names: RecordNames, user_metadata: Mapping[str, str], attempt: int, seen: _Seen
    ) -> None:
        """Read the object, run the job, write the result (under the object's claim). A video is streamed to disk
        and processed a chunk at a time, its finished chunks kept in the output store so a retry resumes (and
        deleted when the video is refused: an input error is not retried)."""
        source_store, output_store = self._stores[route.name]
        params = object_params(route, user_metadata, self._context)
        with tempfile.TemporaryDirectory(prefix="portrait-object-") as folder:
            payload, info = await asyncio.to_thread(read_object, source_store, names.key, Path(folder), self._context)
            seen.source = describe_source(route.input, info)  # the version actually read
            timeout_s = self._job_timeout_s
            chunks = None
            if isinstance(payload, Path):
                chunks = StoreChunkStore.for_object(
                    output_store, names.key, Path(folder) / "chunks", lambda: source_store.exists(names.key)
                )
                payload = VideoInput(payload, chunks, result=Path(folder) / "result.mp4")
                timeout_s *= await asyncio.to_thread(video_deadline_factor, payload.path, self._context)
            progress = StoredProgress(output_store, names.key)  # what GET /v1/jobs/{id} shows while it runs
            await asyncio.to_thread(clear_waiting, output_store, names.key)  # it runs: it waits for nothing now
            try:
                with reporting_to(progress):
                    work = self._execute(route.task, payload, params)
                    result = await within_deadline(work, timeout_s, wait_stopped=True)
            except InputError:
                if chunks is not None:  # a video refused mid-way (a frame over a limit, a damaged track): no resume
                    await asyncio.to_thread(chunks.clear)
                raise
            finally:
                await progress.close()
            record = self._result_record(route, names.key, seen.source, params, result, attempt)
            await asyncio.to_thread(write_result, output_store, names, result, record)
            if chunks is not None:
                await asyncio.to_thread(chunks.clear)
        seen.lag_s = record.event_lag_s

    def _result_record(
        self, route: Route, key: str, source: SourceOut, params: JobParams, result: JobResult, attempt: int
    ) -> ResultRecord:
        finished_at = _now()
        uploaded_at = source.last_modified or finished_at
        within = route.output.prefix
        return ResultRecord(
            source=source,
            route=route.name,
            task=route.task,
            params=params.model_dump(by_alias=True),
            result_key=output_key(key, result, within=within),
            sheet_key=companion_key(key, result, "sheet", within=within),
            hd_key=companion_key(key, result, "hd", within=within),
            attachments_key=attachments_key(key, result) if params.return_ == "json" else None,
            meta=result.meta,
            uploaded_at=uploaded_at,
            finished_at=finished_at,
            event_lag_s=round((finished_at - uploaded_at).total_seconds(), 3),
            attempts=attempt,
        )


def _now() -> datetime:
    return datetime.now(UTC)
