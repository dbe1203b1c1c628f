"""The bucket worker's in-memory bookkeeping: objects waiting for a slot, and one attempt per result name at a time.

``PendingObjects`` is what the webhook fills: bounded (past ``max_pending`` the whole delivery is refused with a 503,
so MinIO keeps it in its ``queue_dir`` and replays it later, instead of the runner growing until it is killed), one
entry per (route, key, ETag) however often an event is delivered, drained by a fixed number of consumers.
``KeyLocks`` outlives a worker: a reconfigured runner hands it to the new worker, so an object the old worker is still
processing is not started again by the new one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from deployments.common.errors import Overloaded


@dataclass(frozen=True)
class PendingObject:
    route: str
    key: str
    etag: str | None  # from the event, when it carried one


class PendingFull(Overloaded):
    """The runner's queue is full: 503 to the webhook, so the sender keeps the events and delivers them again."""


class PendingObjects:
    """First in, first out; bounded; deduplicated against what waits and what is being processed."""

    def __init__(self, max_pending: int) -> None:
        self.max_pending = max_pending
        self._waiting: dict[PendingObject, None] = {}  # insertion-ordered set
        self._busy: set[PendingObject] = set()
        self._has_work = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._closed = False

    def __len__(self) -> int:
        return len(self._waiting) + len(self._busy)

    def offer(self, items: Iterable[PendingObject]) -> int:
        """Queue the items not already waiting or in flight, all or none; ``PendingFull`` past the bound.

        Returns how many were new."""
        new = [item for item in dict.fromkeys(items) if item not in self._waiting and item not in self._busy]
        if len(self) + len(new) > self.max_pending:
            raise PendingFull(
                f"the bucket runner has {len(self)} objects waiting (max_pending {self.max_pending}); deliver later",
                details={"pending": len(self), "max_pending": self.max_pending, "refused": len(new)},
            )
        for item in new:
            self._waiting[item] = None
        if new:
            self._idle.clear()
            self._has_work.set()
        return len(new)

    async def take(self) -> PendingObject | None:
        """The oldest waiting object (now in flight until ``done``), or ``None`` once closed and empty."""
        while not self._waiting:
            if self._closed:
                return None
            self._has_work.clear()
            await self._has_work.wait()
        item = next(iter(self._waiting))
        del self._waiting[item]
        self._busy.add(item)
        return item

    def done(self, item: PendingObject) -> None:
        self._busy.discard(item)
        if not self._waiting and not self._busy:
            self._idle.set()

    async def join(self) -> None:
        """Until nothing waits and nothing is in flight."""
        await self._idle.wait()

    def close(self) -> list[PendingObject]:
        """Take no more work: return what was still waiting (the consumers finish what they hold, then stop)."""
        self._closed = True
        left = list(self._waiting)
        self._waiting.clear()
        if not self._busy:
            self._idle.set()
        self._has_work.set()
        return left


class KeyLocks:
    """One lock per name, created on demand and dropped when no one holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[tuple[str, str], tuple[asyncio.Lock, int]] = {}  # lock, holders and waiters

    @asynccontextmanager
    async def hold(self, name: tuple[str, str]) -> AsyncIterator[None]:
        lock, users = self._locks.get(name, (asyncio.Lock(), 0))
        self._locks[name] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[name]
            if users == 1:
                del self._locks[name]
            else:
                self._locks[name] = (lock, users - 1)
