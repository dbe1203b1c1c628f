"""The jobs API's work, without HTTP: accept a job (stored, then queued), find it, list, cancel. No Ray.

The queue is the bucket runner's (``JobQueue``): ``BucketRunnerClient`` on Serve, ``LocalJobQueue`` in-process.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from deployments.common.errors import InputError, PortraitError
from serve_app.jobs_api.config import JobsConfig
from serve_app.jobs_api.layout import JobRef, expiry_of, is_job_id, new_job_id
from serve_app.jobs_api.records import JobRecord, JobState, JobStatus, JobView
from serve_app.jobs_api.runner import JobsRunner
from serve_app.jobs_api.store import JobStore


class JobNotFound(InputError):
    code = "not_found"
    http_status = 404


class JobGone(InputError):
    """The job existed and has expired (``retention_s``): its input, result and record are deleted."""

    code = "gone"
    http_status = 410


class JobNotReady(InputError):
    code = "not_ready"
    http_status = 409


class JobQueue(Protocol):
    async def enqueue(self, task: str, ref: JobRef) -> None:
        """Hand a stored job to the runner; ``Overloaded``/``StageUnavailable`` (503) when it cannot take it."""
        ...


class LocalJobQueue:
    """The runner in this process (tests, one box without Serve)."""

    def __init__(self, runner: JobsRunner) -> None:
        self.runner = runner

    async def enqueue(self, task: str, ref: JobRef) -> None:
        self.runner.enqueue(task, ref)


@dataclass(frozen=True)
class Submission:
    task: str
    data: bytes
    fields: dict[str, Any]  # the options, as sent
    callback_url: str | None = None
    idempotency_key: str | None = None


class JobsService:
    def __init__(
        self, config: JobsConfig, store: JobStore, queue: JobQueue, clock: Callable[[], datetime] | None = None
    ) -> None:
        self.config = config
        self.store = store
        self._queue = queue
        self._clock = clock or (lambda: datetime.now(UTC))

    async def submit(self, owner: str, job: Submission) -> tuple[JobView, bool]:
        """(the job, whether it is new): the same idempotency key of the same owner gives the same job."""
        digest = hashlib.sha256(job.idempotency_key.encode()).hexdigest() if job.idempotency_key else None
        if digest is not None:
            earlier = await asyncio.to_thread(self.store.idempotent_job, owner, digest)
            if earlier is not None and expiry_of(earlier) > self._clock():
                view = await asyncio.to_thread(self.store.view, JobRef(owner, earlier))
                if view is not None:
                    return view, False
        created_at = self._clock()
        expires_at = created_at + timedelta(seconds=self.config.retention_s)
        record = JobRecord(
            id=new_job_id(expires_at),
            task=job.task,
            owner=owner,
            params=job.fields,
            callback_url=job.callback_url,
            idempotency=digest,
            created_at=created_at,
            expires_at=expires_at,
            input_bytes=len(job.data),
        )
        ref = JobRef(owner, record.id)
        await asyncio.to_thread(self.store.create, record, job.data, job.fields)
        try:
            await self._queue.enqueue(job.task, ref)
        except PortraitError:
            await asyncio.to_thread(self.store.delete, ref, record)  # refused: nothing accepted, nothing kept
            raise
        await asyncio.to_thread(self.store.remember_idempotency, record)
        return JobView(record=record, state=JobState(updated_at=created_at)), True

    async def view(self, owner: str, job_id: str) -> JobView:
        """404 for an id that is not the owner's, 410 for one past its expiry."""
        if not is_job_id(job_id):
            raise JobNotFound(f"no job {job_id!r}")
        if expiry_of(job_id) <= self._clock():
            raise JobGone(f"job {job_id} has expired: its input, result and record are deleted")
        view = await asyncio.to_thread(self.store.view, JobRef(owner, job_id))
        if view is None:
            raise JobNotFound(f"no job {job_id!r}")
        return view

    async def list(self, owner: str, status: JobStatus | None, limit: int) -> list[JobView]:
        """The owner's jobs, newest first (ids start with their expiry)."""
        refs = await asyncio.to_thread(lambda: sorted(self.store.refs(owner), key=lambda r: r.id, reverse=True))
        views = []
        for ref in refs:
            if expiry_of(ref.id) <= self._clock():
                continue
            view = await asyncio.to_thread(self.store.view, ref)
            if view is not None and (status is None or view.status == status):
                views.append(view)
                if len(views) >= limit:
                    break
        return views

    async def cancel(self, owner: str, job_id: str) -> JobView | None:
        """A queued or running job: cancelled, its data deleted (the record stays until it expires). A finished job:
        everything deleted now (None)."""
        view = await self.view(owner, job_id)
        ref = JobRef(owner, job_id)
        if view.status in ("queued", "running"):
            state = view.state.model_copy(update={"status": "cancelled", "updated_at": self._clock()})
            await asyncio.to_thread(self.store.put_state, ref, state)
            await asyncio.to_thread(self.store.delete_data, ref, view.record.task)
            return JobView(record=view.record, state=state)
        await asyncio.to_thread(self.store.delete, ref, view.record)
        return None
