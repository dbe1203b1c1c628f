"""How much callback work one runner holds at once. Every bucket route and every job runs on the one ``BucketRunner``
replica, so what receivers can make it hold is bounded here, for job endings and bucket-route callbacks alike:

- at most ``args.jobs.callback_concurrency`` POSTs at once (``slots``; an attempt holds one for at most
  ``callback_timeout_s``, never while it waits for its next try);
- at most ``args.jobs.callback_held_max`` callbacks held in memory (``hold``: being sent, or waiting for their next
  try; every job's ending counts, callback or not).

Work that finds the queue full is not lost, nor kept here: it is already in its store (a job: its input, kept until its
callback is settled, and its state; a bucket route's object: its ``.callback`` file), and its source's ``refill`` (which
lists its store and offers what it finds again) runs as soon as a held one ends.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

from serve_app.runner.jobs_config import JobsConfig

logger = logging.getLogger(__name__)

Work = Callable[[], Awaitable[Any]]
T = TypeVar("T")
LISTING_CHUNK = 256  # a refill reads a store's listing this many at a time


class CallbackQueue:
    def __init__(self, *, concurrency: int, held_max: int) -> None:
        if concurrency < 1 or held_max < 1:
            raise ValueError(f"concurrency and held_max must be at least 1, got {concurrency} and {held_max}")
        self.slots = asyncio.Semaphore(concurrency)
        self.concurrency = concurrency
        self.held_max = held_max
        self._held: dict[str, asyncio.Task[Any]] = {}
        self._refused: dict[str, Work] = {}  # source → its refill, to run when there is room
        self._refilling: dict[str, tuple[asyncio.Task[Any], Work]] = {}

    @classmethod
    def of(cls, config: JobsConfig) -> CallbackQueue:
        return cls(concurrency=config.callback_concurrency, held_max=config.callback_held_max)

    def __len__(self) -> int:
        """Callbacks (and job endings) held now."""
        return len(self._held)

    def holds(self, key: str) -> bool:
        return key in self._held

    def waiting(self, source: str) -> bool:
        """Whether ``source`` has work in its store that found the queue full (its refill pending or running)."""
        return source in self._refused or source in self._refilling

    def hold(self, key: str, work: Work, *, source: str, refill: Work) -> bool:
        """Start ``work()`` as ``key`` (True; already held: nothing more), or, when ``held_max`` are held, leave it
        (False) and run ``refill()`` once there is room: the work must be findable in the source's store."""
        if key in self._held:
            return True
        if len(self._held) >= self.held_max:
            self._refused[source] = refill
            return False
        task = asyncio.ensure_future(work())
        self._held[key] = task
        task.add_done_callback(lambda done: self._ended(key, done))
        return True

    async def drain(self) -> None:
        """Wait until nothing is held or refilling (tests). A refill whose store failed waits for the next ending."""
        while tasks := [*self._held.values(), *(task for task, _ in self._refilling.values())]:
            await asyncio.gather(*tasks, return_exceptions=True)

    def _ended(self, key: str, task: asyncio.Task[Any]) -> None:
        if self._held.get(key) is task:
            del self._held[key]
        _log_failure(task, "a callback")
        self._refill()

    def _refill(self) -> None:
        """Run the refused sources' refills while there is room (one at a time per source)."""
        for source in list(self._refused):
            if len(self._held) >= self.held_max:
                return
            if source in self._refilling:
                continue  # it runs again when this one ends, if refused meanwhile
            refill = self._refused.pop(source)
            task = asyncio.ensure_future(refill())
            self._refilling[source] = (task, refill)
            task.add_done_callback(lambda done, source=source: self._refilled(source, done))

    def _refilled(self, source: str, task: asyncio.Task[Any]) -> None:
        _, refill = self._refilling.pop(source)
        if _log_failure(task, f"refilling the callbacks of {source}"):
            # its store failed: tried again when the next held callback ends, not in a loop now
            self._refused.setdefault(source, refill)
            return
        self._refill()


def _log_failure(task: asyncio.Task[Any], what: str) -> bool:
    if task.cancelled() or task.exception() is None:
        return False
    logger.error("%s failed", what, exc_info=task.exception())
    return True


async def next_chunk(items: Iterator[T], size: int = LISTING_CHUNK) -> list[T]:
    """The next ``size`` items of a blocking iterator (a store's listing, for a refill), read in a thread."""
    return await asyncio.to_thread(lambda: list(itertools.islice(items, size)))
