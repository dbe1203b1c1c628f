"""The jobs API's work, without HTTP: accept a job (stored, then queued), find it, list, cancel. No Ray.

The queue is the bucket runner's (``JobQueue``): ``BucketRunnerClient`` on Serve, ``LocalJobQueue`` in-process.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from deployments.common.errors import InputError, PortraitError
from serve_app.auth.errors import Forbidden
from serve_app.runner.jobs_config import JobsConfig
from serve_app.runner.jobs_layout import JobRef, expiry_of, is_job_id, new_job_id
from serve_app.runner.jobs_records import IdempotencyClaim, JobRecord, JobState, JobStatus, JobView
from serve_app.runner.jobs_runner import JobsRunner
from serve_app.runner.jobs_store import JobStore
from serve_app.upload_spool import SpooledBody
from storage.errors import PreconditionFailed

CLAIM_TTL_S = 300.0  # an idempotency claim not accepted by then was left by a submit that died
CLAIM_WAIT_S = 10.0  # how long a submit waits for the one that claimed its key, before 409 idempotency_in_progress
CLAIM_POLL_S = 0.05


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


class IdempotencyKeyReused(InputError):
    """The idempotency key named a job submitted with other content: a key names one submission, never two."""

    code = "idempotency_key_reused"
    http_status = 422


class IdempotencyInProgress(InputError):
    """The submit that claimed the idempotency key has not finished accepting its job yet (``Retry-After``)."""

    code = "idempotency_in_progress"
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
    body: SpooledBody  # the input: in memory, or in a temporary file that lives while the submit does
    fields: dict[str, Any]  # the options, as sent
    callback_url: str | None = None
    idempotency_key: str | None = None


def _fingerprint(job: Submission) -> str:
    """What a repeated submit must repeat: task, options, callback and input bytes."""
    described = json.dumps([job.task, job.fields, job.callback_url], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(described.encode() + job.body.sha256).hexdigest()  # the input hashed as it arrived


class JobsService:
    """``ids_are_capabilities``: every caller is one owner (no keys) on a network (``serve_app.jobs_api.tenancy``), so
    only a job's id leads to it: the list is refused, and a reused idempotency key does not name the job it is taken
    by."""

    def __init__(
        self,
        config: JobsConfig,
        store: JobStore,
        queue: JobQueue,
        clock: Callable[[], datetime] | None = None,
        *,
        ids_are_capabilities: bool = False,
    ) -> None:
        self.config = config
        self.callback_secret = config.signing_secret()  # the app's, read here (submits without it need the key's)
        self.store = store
        self._queue = queue
        self._clock = clock or (lambda: datetime.now(UTC))
        self.ids_are_capabilities = ids_are_capabilities

    async def submit(self, owner: str, job: Submission) -> tuple[JobView, bool]:
        """(the job, whether it is new): the same idempotency key of the same owner gives the same job, however close
        together the submits come (``_submit_once``)."""
        if job.idempotency_key is None:
            record = self._new_record(owner, job, None)
            return await self._accept(record, job), True
        digest = hashlib.sha256(job.idempotency_key.encode()).hexdigest()
        return await self._submit_once(owner, job, digest)

    async def _submit_once(self, owner: str, job: Submission, digest: str) -> tuple[JobView, bool]:
        """One job per idempotency key: the submit whose conditional write creates the key's claim stores and queues
        the job, then marks the claim accepted; the others wait for that and answer the same job. A claim of an
        expired job, or one left unaccepted past ``CLAIM_TTL_S`` (its submit died), is replaced, again conditionally.
        """
        fingerprint = _fingerprint(job)
        give_up_at = time.monotonic() + CLAIM_WAIT_S
        while time.monotonic() < give_up_at:
            found = await asyncio.to_thread(self.store.claim, owner, digest)
            claim, etag = found or (None, None)
            if claim is not None and self._live(claim):
                if claim.fingerprint not in (None, fingerprint):
                    raise IdempotencyKeyReused(
                        "this idempotency_key was used for another submission (task, options, callback or input)",
                        details={} if self.ids_are_capabilities else {"id": claim.id},
                    )
                if claim.accepted:
                    view = await asyncio.to_thread(self.store.view, JobRef(owner, claim.id))
                    if view is not None:
                        return view, False
                    # Its job was deleted (DELETE of a finished job): the key is free again.
                else:
                    await asyncio.sleep(CLAIM_POLL_S)  # its submit is storing and queueing the job
                    continue
            record = self._new_record(owner, job, digest)
            mine = IdempotencyClaim(id=record.id, fingerprint=fingerprint, accepted=False, claimed_at=record.created_at)
            try:
                my_etag = await asyncio.to_thread(self.store.write_claim, owner, digest, mine, replacing=etag)
            except PreconditionFailed:
                continue  # another submit claimed the key first: answer its job
            if claim is not None and not claim.accepted:  # abandoned: its submit died between claim and acceptance
                await asyncio.to_thread(self.store.purge, JobRef(owner, claim.id))
            view = await self._accept(record, job)
            try:
                accepted = mine.model_copy(update={"accepted": True})
                await asyncio.to_thread(self.store.write_claim, owner, digest, accepted, replacing=my_etag)
            except PreconditionFailed:  # too slow: our claim was taken as abandoned, and this job must not exist
                await asyncio.to_thread(self.store.delete, JobRef(owner, record.id), record)
                continue
            return view, True
        raise IdempotencyInProgress(
            "another submit with this idempotency_key is still being accepted; retry shortly",
            details={"retry_after_s": 1},
        )

    def _live(self, claim: IdempotencyClaim) -> bool:
        """Whether the claim still holds its key: its job has not expired, and it was accepted or is recent."""
        now = self._clock()
        if not is_job_id(claim.id) or expiry_of(claim.id) <= now:
            return False
        if claim.accepted:
            return True
        return claim.claimed_at is not None and (now - claim.claimed_at).total_seconds() < CLAIM_TTL_S

    def _new_record(self, owner: str, job: Submission, digest: str | None) -> JobRecord:
        created_at = self._clock()
        expires_at = created_at + timedelta(seconds=self.config.retention_s)
        return JobRecord(
            id=new_job_id(expires_at),
            task=job.task,
            owner=owner,
            params=job.fields,
            callback_url=job.callback_url,
            idempotency=digest,
            created_at=created_at,
            expires_at=expires_at,
            input_bytes=job.body.size_bytes,
        )

    async def _accept(self, record: JobRecord, job: Submission) -> JobView:
        """Store the job, then queue it; refused by the queue or the store, what was written is deleted, the key's
        claim with it (nothing accepted, nothing kept, and the next submit with the key goes ahead at once)."""
        ref = JobRef(record.owner, record.id)
        try:
            await asyncio.to_thread(self.store.create, record, job.body.content, job.fields)
            await self._queue.enqueue(job.task, ref)
        except PortraitError:
            await asyncio.to_thread(self.store.delete, ref, record)
            raise
        return JobView(record=record, state=JobState(updated_at=record.created_at))

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
        """The owner's jobs, newest first (ids start with their expiry); 403 when ids are capabilities."""
        if self.ids_are_capabilities:
            raise Forbidden(
                "listing jobs needs an API key: without keys on a network a job is reached only by its id "
                '(docs/operations.md "Keys and quotas")'
            )
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
