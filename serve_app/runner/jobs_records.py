"""What the jobs store holds about a job (``JobRecord``, ``JobState``) and what the API answers (``JobOut``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from serve_app.runner.records import ErrorRecord, ResultRecord
from serve_app.schemas import ErrorDetail, ResultMeta

JobStatus = Literal["queued", "running", "succeeded", "failed", "cancelled"]
FINISHED = ("succeeded", "failed", "cancelled")


class JobRecord(BaseModel):
    """Written once, at submit: what was asked, by whom, until when."""

    id: str
    task: str
    owner: str
    params: dict[str, Any]  # the options as sent (validated at submit; the runner validates them the same way)
    callback_url: str | None = None
    idempotency: str | None = None  # sha256 of the idempotency key
    created_at: datetime
    expires_at: datetime
    input_bytes: int


class IdempotencyClaim(BaseModel):
    """``idem/<owner>/<sha256 of the key>.json``: the job an idempotency key names. Created by a conditional write, so
    of submits racing with one key exactly one claims it; ``accepted`` once its job is stored and queued."""

    id: str
    fingerprint: str | None = None  # sha256 of what was submitted (None: written before fingerprints existed)
    accepted: bool = True  # pointers written before claims existed were written after acceptance
    claimed_at: datetime | None = None


class CallbackState(BaseModel):
    attempts: int = 0
    delivered_at: datetime | None = None
    given_up_at: datetime | None = None
    last_error: str | None = None

    @property
    def settled(self) -> bool:
        return self.delivered_at is not None or self.given_up_at is not None


class JobState(BaseModel):
    """What changes while a job lives: cancelled, running and its progress, the callback's deliveries."""

    status: JobStatus = "queued"
    progress: float = Field(0.0, ge=0.0, le=1.0)
    # what the running job counted: a video's ``chunks``, a render's ``steps_done`` of ``steps``
    progress_detail: dict[str, int] | None = None
    # why a queued job waits: the failure that sent it back for the next scan (``model_unavailable``...)
    waiting: ErrorDetail | None = None
    updated_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    callback: CallbackState = Field(default_factory=CallbackState)


class JobResultOut(BaseModel):
    url: str
    media_type: str
    bytes: int
    meta: ResultMeta


class JobOut(BaseModel):
    id: str
    task: str
    status: JobStatus
    progress: float
    progress_detail: dict[str, int] | None = None
    waiting: ErrorDetail | None = None
    created_at: datetime
    updated_at: datetime
    expires_at: datetime
    params: dict[str, Any]
    status_url: str
    result_url: str
    result: JobResultOut | None = None
    error: ErrorDetail | None = None


class JobAccepted(BaseModel):
    id: str
    status: JobStatus
    status_url: str
    result_url: str


class JobListOut(BaseModel):
    jobs: list[JobOut]


def status_url(job_id: str) -> str:
    return f"/v1/jobs/{job_id}"


@dataclass(frozen=True)
class JobView:
    """A job as its objects tell it: the record, its state, and the bucket runner's result or error record."""

    record: JobRecord
    state: JobState
    result: ResultRecord | None = None
    error: ErrorRecord | None = None

    @property
    def status(self) -> JobStatus:
        if self.state.status == "cancelled":
            return "cancelled"
        if self.result is not None:
            return "succeeded"
        if self.error is not None:
            return "failed"
        return self.state.status

    def to_out(self) -> JobOut:
        status = self.status
        updated = [self.state.updated_at, self.record.created_at]
        updated += [self.result.finished_at] if self.result else []
        updated += [self.error.failed_at] if self.error else []
        url = status_url(self.record.id)
        result = None
        if status == "succeeded" and self.result is not None:
            meta = self.result.meta
            result = JobResultOut(url=url + "/result", media_type=meta.media_type, bytes=meta.bytes, meta=meta)
        return JobOut(
            id=self.record.id,
            task=self.record.task,
            status=status,
            progress=1.0 if status in ("succeeded", "failed") else self.state.progress,
            progress_detail=self.state.progress_detail if status == "running" else None,
            waiting=self.state.waiting if status == "queued" else None,
            created_at=self.record.created_at,
            updated_at=max(updated),
            expires_at=self.record.expires_at,
            params=self.record.params,
            status_url=url,
            result_url=url + "/result",
            result=result,
            error=self.error.error if status == "failed" and self.error is not None else None,
        )


def job_json(out: JobOut) -> dict[str, Any]:
    """The wire body: ``result`` or ``error`` only when there is one."""
    body = out.model_dump(mode="json")
    for name in ("result", "error"):
        if body[name] is None:
            del body[name]
    return body
