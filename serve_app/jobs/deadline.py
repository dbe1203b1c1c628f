"""A job's deadline, shared by every trigger (HTTP routes, the bucket runner): no worker thread starts after it.

``asyncio.wait_for`` cancels a job's coroutine, but work already running in a worker thread (``asyncio.to_thread``)
cannot be interrupted and keeps burning CPU; a retry started meanwhile doubles the load. So the CPU work of a job runs
through ``run_in_worker``, which refuses to start once the job's deadline has passed or the job was stopped, and counts
the threads still running, so a caller can wait for them (``within_deadline(..., wait_stopped=True)``: the bucket runner
keeps the slot until the timed-out job has really stopped, so its retry never overlaps it).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine
from contextvars import ContextVar
from typing import Any, TypeVar

from deployments.common.errors import RequestTimeout

T = TypeVar("T")


class JobDeadline:
    """When the job must end, whether it was stopped, and how many of its worker threads still run."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._expires_at = time.monotonic() + timeout_s
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._running = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._loop = asyncio.get_running_loop()

    def stop(self) -> None:
        self._stopped.set()

    def remaining_s(self) -> float:
        """Seconds left; 0 once stopped."""
        return 0.0 if self._stopped.is_set() else max(self._expires_at - time.monotonic(), 0.0)

    def check(self) -> None:
        """Raise ``RequestTimeout`` when the job was stopped or its time is up."""
        if self._stopped.is_set() or time.monotonic() > self._expires_at:
            raise timeout_error(self.timeout_s)

    async def run_in_thread(self, fn: Callable[..., T], *args: Any) -> T:
        self.check()
        with self._lock:
            self._running += 1
            self._idle.clear()
        return await asyncio.to_thread(self._tracked, fn, *args)

    async def wait_stopped(self) -> None:
        """Until no worker thread of the job runs any more."""
        await self._idle.wait()

    def _tracked(self, fn: Callable[..., T], *args: Any) -> T:
        try:
            return fn(*args)
        finally:
            with self._lock:
                self._running -= 1
                if self._running == 0:
                    self._loop.call_soon_threadsafe(self._idle.set)


_CURRENT: ContextVar[JobDeadline | None] = ContextVar("job_deadline", default=None)


async def run_in_worker(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in a worker thread, not started once the current job's deadline passed or it was stopped."""
    deadline = _CURRENT.get()
    if deadline is None:
        return await asyncio.to_thread(fn, *args)
    return await deadline.run_in_thread(fn, *args)


def current_checkpoint() -> Callable[[], None]:
    """The current job's deadline as a check its worker threads call between steps of long work (a video's packets):
    it raises ``RequestTimeout`` once the job was stopped or its time is up; a no-op outside a job."""
    deadline = _CURRENT.get()
    return deadline.check if deadline is not None else _no_deadline


def deadline_unix_s() -> float | None:
    """When the current job's time is up, as wall-clock seconds (what another process can check); None outside a
    job."""
    deadline = _CURRENT.get()
    return None if deadline is None else time.time() + deadline.remaining_s()


def _no_deadline() -> None:
    """Outside a job: nothing stops the work."""


async def within_deadline(work: Coroutine[Any, Any, T], timeout_s: float, *, wait_stopped: bool = False) -> T:
    """``await work`` under a deadline of ``timeout_s``; past it, ``RequestTimeout`` and no further worker thread starts
    (``work`` is a coroutine not yet started: it runs in a task that sees this deadline).

    With ``wait_stopped`` the error comes only once the worker thread running at the deadline has ended (the thread
    cannot be interrupted), so the caller's next attempt never runs beside it."""
    deadline = JobDeadline(timeout_s)
    token = _CURRENT.set(deadline)
    try:
        return await asyncio.wait_for(work, timeout_s)
    except TimeoutError:
        deadline.stop()
        if wait_stopped:
            await deadline.wait_stopped()
        raise timeout_error(timeout_s) from None
    finally:
        _CURRENT.reset(token)


def timeout_error(timeout_s: float) -> RequestTimeout:
    return RequestTimeout(f"no answer within {timeout_s:g} s; retry later", details={"timeout_s": timeout_s})
