"""What the bucket worker says about objects and routes, and when it tries again: outcomes, route state, retries."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from deployments.common.errors import InternalError, ServiceError


class Status(StrEnum):
    DONE = "done"  # result and metadata written
    SKIPPED = "skipped"  # a record already names this ETag
    FAILED = "failed"  # the caller's fault: error record written, not retried
    DEFERRED = "deferred"  # transient failure after every retry: left for the reconciler, nothing written
    GONE = "gone"  # deleted before it could be processed


@dataclass(frozen=True)
class ObjectOutcome:
    route: str
    key: str
    status: Status
    etag: str | None = None
    code: str | None = None  # error code for FAILED / DEFERRED
    attempts: int = 0
    lag_s: float | None = None  # upload → result written, for DONE


@dataclass(frozen=True)
class RouteState:
    """One route as ``/healthz`` shows it: the last scan of its input, the objects waiting, the last problem."""

    last_scan_at: datetime | None = None
    listed: int = 0  # objects the last scan listed
    backlog: int = 0  # objects waiting for a slot or in flight
    scan_failing: bool = False  # the last scan of the input failed (the store is unreachable, the folder is gone)
    last_error: str | None = None  # a failed scan, or an object left for the reconciler / recorded as our bug
    last_error_at: datetime | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "status": "failing" if self.scan_failing else "ok",
            "last_scan_at": self.last_scan_at.isoformat() if self.last_scan_at else None,
            "listed": self.listed,
            "backlog": self.backlog,
            "last_error": self.last_error,
            "last_error_at": self.last_error_at.isoformat() if self.last_error_at else None,
        }


class RetryPolicy(BaseModel):
    """Exponential backoff with jitter; bounded so a stuck object cannot hold a slot (the runner's ``retry:``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_attempts: int = Field(4, ge=1, le=20)
    initial_backoff_s: float = Field(0.5, ge=0, le=60)
    max_backoff_s: float = Field(10.0, ge=0, le=600)

    def delay_s(self, attempt: int) -> float:
        base = min(self.max_backoff_s, self.initial_backoff_s * 2 ** (attempt - 1))
        return base * random.uniform(0.5, 1.0)


DEFAULT_RETRY = RetryPolicy()


def is_transient(exc: BaseException) -> bool:
    """Failures that pass by themselves: service or store unavailable, timeouts, dropped connections (not our bugs)."""
    return isinstance(exc, (ServiceError, TimeoutError, ConnectionError)) and not isinstance(exc, InternalError)
