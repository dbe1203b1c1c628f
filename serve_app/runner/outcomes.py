"""What the bucket worker says about objects and routes, and when it tries again: outcomes, route state, retries.

Every failure of an attempt is classified once (``classify``), whatever step raised it (reading records, the object,
running the job, writing the result or the error record):

- the caller's fault (``InputError``): an error record at once, with the error's code;
- ``TRANSIENT`` (throttling, 5xx, network, a replica restarting): retried with backoff, then left for the next scan
  with nothing written;
- ``PERMANENT`` (the store refuses: access denied, no such bucket, key too long, archived object; the operator's
  edit endpoint fails, an outside service a job does not wait for), ``TIMEOUT`` (slower than the job timeout) and
  ``BUG`` (ours): retried, then an error record with the store's or the endpoint's code (``editor_failed``,
  ``editor_timeout``), ``timeout`` or ``internal_error``, so the object is not redone on every scan. ``Strikes``
  counts these per object version across scans, so N tries means N, not N per scan.

No Ray here: the deployment passes Ray's transient errors in; a jobs store can reuse the same pieces.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from deployments.common.errors import EditorFailed, InternalError, PortraitError, RequestTimeout, ServiceError
from storage.errors import ObjectStoreError


class Status(StrEnum):
    DONE = "done"  # result and metadata written
    SKIPPED = "skipped"  # a record already names this ETag
    FAILED = "failed"  # the caller's fault: error record written, not retried
    DEFERRED = "deferred"  # left for the next scan, nothing written: transient after every retry, or claimed elsewhere
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


class Fault(StrEnum):
    TRANSIENT = "transient"  # passes by itself: retry, then leave for the next scan
    PERMANENT = "permanent"  # the store refuses this object: an error record after N tries
    TIMEOUT = "timeout"  # slower than the job timeout: a ``timeout`` record after N tries
    BUG = "bug"  # ours: an ``internal_error`` record after N tries


def is_transient(exc: BaseException) -> bool:
    """Failures that pass by themselves: service or store unavailable, dropped connections (not our bugs, not a
    store's refusal)."""
    if isinstance(exc, ObjectStoreError):
        return exc.retryable
    return isinstance(exc, (ServiceError, ConnectionError)) and not isinstance(exc, InternalError)


def classify(exc: BaseException, transient: Callable[[BaseException], bool] = is_transient) -> Fault:
    """The kind of a failed attempt that is not the caller's fault (``InputError`` is recorded before this)."""
    if isinstance(exc, (TimeoutError, RequestTimeout)):
        return Fault.TIMEOUT
    if isinstance(exc, ObjectStoreError) and not exc.retryable:
        return Fault.PERMANENT
    if isinstance(exc, EditorFailed):  # its own code in the record after the retries, not a wait for the endpoint
        return Fault.PERMANENT
    return Fault.TRANSIENT if transient(exc) else Fault.BUG


def failure_code(exc: BaseException, fault: Fault) -> str:
    """The code an error record (or a deferred outcome) gives for a failure of this kind."""
    if fault is Fault.TIMEOUT:
        return RequestTimeout.code
    if fault is Fault.BUG:
        return InternalError.code
    return exc.code if isinstance(exc, PortraitError) else ServiceError.code


class Strikes:
    """Failures that end in an error record (permanent, timeout, bug), counted per object version across scans;
    bounded: the oldest entries go first."""

    def __init__(self, max_entries: int = 10_000) -> None:
        self._counts: dict[tuple[str, str, str | None], int] = {}
        self._max_entries = max_entries

    def add(self, route: str, key: str, etag: str | None) -> int:
        name = (route, key, etag)
        count = self._counts.pop(name, 0) + 1
        self._counts[name] = count
        while len(self._counts) > self._max_entries:
            del self._counts[next(iter(self._counts))]
        return count

    def clear(self, route: str, key: str, etag: str | None) -> None:
        self._counts.pop((route, key, etag), None)
