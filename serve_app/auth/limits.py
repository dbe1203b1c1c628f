"""Rate limits and daily quotas per key: a token bucket and a per-UTC-day counter for each key.

``LimitBook`` is the state, pure and clock-injected. The ingress asks a ``Limiter``: ``LocalLimiter`` holds a book in
the process (tests, one replica); on Serve every ingress replica asks the one named ``KeyLimits`` actor
(``serve_app.auth.deployment``), so a key's limits hold across replicas. The limits travel with each call, so a
changed config applies at once and the book holds nothing but counters.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

from serve_app.auth.keys import ApiKey


@dataclass(frozen=True)
class Decision:
    """Whether one request may pass; when not, why (``rate_limited`` / ``quota_exceeded``) and when to come back."""

    allowed: bool
    code: str | None = None
    retry_after_s: float = 0.0


@dataclass(frozen=True)
class Usage:
    day: str  # UTC date the counter belongs to
    jobs_today: int
    tokens: float  # requests the key may send right now


@dataclass
class _Bucket:
    tokens: float
    at_s: float


class LimitBook:
    """Token buckets (``rate_per_s``, ``bucket_size``) and per-day job counters of every key seen."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}
        self._days: dict[str, tuple[str, int]] = {}  # key id → (UTC day, jobs counted that day)

    def take(self, key: ApiKey, *, job: bool) -> Decision:
        """Spend one request of ``key``'s rate, and one job of its daily quota when ``job`` (a POST submitting
        work). Nothing is spent when the answer is no."""
        now_s = self._clock()
        day, count = self._day_count(key.id, now_s)
        if job and key.daily_quota is not None and count >= key.daily_quota:
            return Decision(False, "quota_exceeded", _seconds_to_next_day(now_s))
        if key.rate_per_s is not None:
            bucket = self._refill(key, now_s)
            if bucket.tokens < 1.0:
                return Decision(False, "rate_limited", (1.0 - bucket.tokens) / key.rate_per_s)
            bucket.tokens -= 1.0
        if job:
            self._days[key.id] = (day, count + 1)
        return Decision(True)

    def usage(self, key: ApiKey) -> Usage:
        now_s = self._clock()
        day, count = self._day_count(key.id, now_s)
        tokens = self._refill(key, now_s).tokens if key.rate_per_s is not None else key.bucket_size
        return Usage(day=day, jobs_today=count, tokens=round(tokens, 3))

    def _refill(self, key: ApiKey, now_s: float) -> _Bucket:
        bucket = self._buckets.get(key.id)
        if bucket is None:
            bucket = self._buckets[key.id] = _Bucket(tokens=key.bucket_size, at_s=now_s)
        elapsed_s = max(0.0, now_s - bucket.at_s)
        bucket.tokens = min(key.bucket_size, bucket.tokens + elapsed_s * (key.rate_per_s or 0.0))
        bucket.at_s = now_s
        return bucket

    def _day_count(self, key_id: str, now_s: float) -> tuple[str, int]:
        today = datetime.fromtimestamp(now_s, UTC).date().isoformat()
        day, count = self._days.get(key_id, (today, 0))
        return (today, count) if day == today else (today, 0)


def _seconds_to_next_day(now_s: float) -> float:
    now = datetime.fromtimestamp(now_s, UTC)
    midnight = datetime(now.year, now.month, now.day, tzinfo=UTC) + timedelta(days=1)
    return (midnight - now).total_seconds()


class Limiter(Protocol):
    """Where the ingress asks whether a key may pass: one book for every replica of the service."""

    async def take(self, key: ApiKey, *, job: bool) -> Decision: ...

    async def usage(self, key: ApiKey) -> Usage: ...


class LocalLimiter:
    """The in-process twin of the ``KeyLimits`` actor: one book in this process."""

    def __init__(self, book: LimitBook | None = None) -> None:
        self._book = book or LimitBook()

    async def take(self, key: ApiKey, *, job: bool) -> Decision:
        return self._book.take(key, job=job)

    async def usage(self, key: ApiKey) -> Usage:
        return self._book.usage(key)
