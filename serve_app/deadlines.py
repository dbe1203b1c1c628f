"""Bounds on how long a request may hold the ingress: a job's answer within the request timeout (504), and CPU work
of the ingress in a worker thread under a deadline (503), so the event loop keeps answering ``/livez``, ``/healthz``
and the webhook meanwhile.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from deployments.common.errors import Overloaded, RequestTimeout
from serve_app.settings import Settings

T = TypeVar("T")


async def within_request_timeout(work: Awaitable[T], settings: Settings) -> T:
    """A job's answer, or our 504 ``timeout`` after ``request_timeout_s`` (a model scaling up from zero replicas
    answers late; the caller gets JSON it can act on instead of a connection that hangs)."""
    try:
        return await asyncio.wait_for(work, settings.request_timeout_s)
    except TimeoutError:
        raise RequestTimeout(
            f"no answer within {settings.request_timeout_s:g} s; retry later",
            details={"timeout_s": settings.request_timeout_s},
        ) from None


async def in_thread_within(deadline_s: float, what: str, work: Callable[..., T], *args: object) -> T:
    """``work(*args)`` in a worker thread, or 503 ``overloaded`` past ``deadline_s``. Python cannot stop the thread,
    which finishes on its own: what runs here must be bounded itself; the deadline only frees the caller."""
    try:
        return await asyncio.wait_for(asyncio.to_thread(work, *args), deadline_s)
    except TimeoutError:
        raise Overloaded(
            f"{what} took longer than {deadline_s:g} s; retry later", details={"deadline_s": deadline_s}
        ) from None
