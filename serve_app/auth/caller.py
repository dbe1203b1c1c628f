"""Who a request or a job acts for: the key, in a context variable set by the key guard (and by the jobs runner for a
stored job), so the job registry checks the task and the metrics label the key wherever a job runs."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from serve_app.auth.errors import Forbidden
from serve_app.auth.keys import ANONYMOUS, ApiKey

_CALLER: ContextVar[ApiKey | None] = ContextVar("portrait_caller", default=None)


def current_key() -> ApiKey | None:
    """The key of the request (or stored job) being served; None when no keys are configured or none was sent."""
    return _CALLER.get()


def caller_id() -> str:
    key = _CALLER.get()
    return key.id if key is not None else ANONYMOUS


@contextmanager
def acting_as(key: ApiKey | None) -> Iterator[None]:
    token = _CALLER.set(key)
    try:
        yield
    finally:
        _CALLER.reset(token)


def require_task(task: str, whole_job: str | None = None) -> None:
    """403 ``forbidden`` when the caller's key is limited to other tasks (a key allowed ``whole_job``, the job
    ``task`` is a step of, may run the step)."""
    key = _CALLER.get()
    if key is not None and not key.may_run(task) and not (whole_job is not None and key.may_run(whole_job)):
        raise Forbidden(
            f"key {key.id!r} may not run {task!r}",
            details={"task": task, "allowed_tasks": sorted(key.tasks or ())},
        )
