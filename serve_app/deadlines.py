"""Bounds on how long a request may hold the ingress: a job's answer within the request timeout (504), and CPU work
of the ingress in a worker thread under a deadline (503), so the event loop keeps answering ``/livez``, ``/healthz``
and the webhook meanwhile.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from deployments.common.errors import Overloaded
from serve_app.jobs.deadline import within_deadline
from serve_app.settings import Settings

T = TypeVar("T")


async def within_request_timeout(work: Coroutine[Any, Any, T], settings: Settings) -> T:
    """A job's answer, or our 504 ``timeout`` after ``request_timeout_s`` (a model scaling up from zero replicas
    answers late; the caller gets JSON it can act on instead of a connection that hangs). The job's stages stop at
    the deadline: the bucket runner's job timeout is the same one (``serve_app.jobs.deadline``)."""
    return await within_deadline(work, settings.request_timeout_s)


async def in_thread_within(deadline_s: float, what: str, work: Callable[..., T], *args: object) -> T:
    """``work(*args)`` in a worker thread, or 503 ``overloaded`` past ``deadline_s``. Python cannot stop the thread,
    which finishes on its own: what runs here must be bounded itself; the deadline only frees the caller."""
    try:
        return await asyncio.wait_for(asyncio.to_thread(work, *args), deadline_s)
    except TimeoutError:
        raise Overloaded(
            f"{what} took longer than {deadline_s:g} s; retry later", details={"deadline_s": deadline_s}
        ) from None
