"""Admission by bytes in flight: the request-body bytes one ingress process holds at once, whatever their number.

``max_ongoing_requests`` counts requests, not bytes: 64 uploads at the video cap are 32 GiB. Every body read under
``serve_app.uploads.stream_body`` reserves its bytes here as they arrive (not a declared ``Content-Length``: a
client that stalls holds only what it sent, until the body deadline), and holds them until its request is answered,
in memory or in a temporary file (``serve_app.upload_spool``). A reservation over
``PORTRAIT_MAX_UPLOAD_BYTES_IN_FLIGHT`` is a 503 ``overloaded`` with ``Retry-After``, never an out-of-memory kill; a
body alone over the budget is taken only when no other is in flight, so a budget below the largest upload slows such
uploads to one at a time but never refuses them.

Each request's reservations live in its :class:`RequestBytes` (in the ASGI scope, under ``SCOPE_KEY``), released by
:class:`UploadBudgetMiddleware` when the request ends: answered, failed, or its client gone.
"""

from __future__ import annotations

import threading

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from deployments.common.errors import Overloaded
from serve_app.app_state import settings_of

SCOPE_KEY = "portrait.upload_bytes"
RETRY_AFTER_S = 5
SETTING = "PORTRAIT_MAX_UPLOAD_BYTES_IN_FLIGHT"


class UploadBudget:
    """The bytes in flight of one process (one ingress replica); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.in_flight = 0

    def take(self, size_bytes: int, limit: int, already_mine: int) -> None:
        """Reserve ``size_bytes`` more for a request holding ``already_mine``, or refuse: 503 ``overloaded`` when
        other requests hold bytes and all of them would pass ``limit``."""
        with self._lock:
            others = self.in_flight - already_mine
            if others > 0 and self.in_flight + size_bytes > limit:
                raise Overloaded(
                    f"the service is receiving too many uploads: {self.in_flight} bytes in flight, "
                    f"{size_bytes} more would pass {limit} ({SETTING}); retry shortly",
                    details={"retry_after_s": RETRY_AFTER_S, "setting": SETTING},
                )
            self.in_flight += size_bytes

    def give(self, size_bytes: int) -> None:
        with self._lock:
            self.in_flight -= size_bytes


class RequestBytes:
    """One request's reservation: grown as its body arrives, released whole when the request ends."""

    def __init__(self, budget: UploadBudget, limit: int) -> None:
        self.budget = budget
        self.limit = limit
        self.held = 0

    def reserve_to(self, total_bytes: int) -> None:
        """Hold at least ``total_bytes`` in all (``Overloaded`` when they do not fit)."""
        if total_bytes > self.held:
            self.budget.take(total_bytes - self.held, self.limit, self.held)
            self.held = total_bytes

    def release(self) -> None:
        held, self.held = self.held, 0
        self.budget.give(held)


def request_bytes(request: Request) -> RequestBytes | None:
    """The request's reservation; None in an app without :func:`install_upload_budget`."""
    return request.scope.get(SCOPE_KEY)


class UploadBudgetMiddleware:
    """Gives each HTTP request its :class:`RequestBytes` and releases them when it ends, on every path."""

    def __init__(self, app: ASGIApp, budget: UploadBudget) -> None:
        self.app = app
        self.budget = budget

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = settings_of(Request(scope)).max_upload_bytes_in_flight
        reservation = scope[SCOPE_KEY] = RequestBytes(self.budget, limit)
        try:
            await self.app(scope, receive, send)
        finally:
            reservation.release()


def install_upload_budget(api) -> UploadBudget:
    """One budget for the app (the ingress process's one app), kept on ``app.state.upload_budget``."""
    budget = UploadBudget()
    api.state.upload_budget = budget
    api.add_middleware(UploadBudgetMiddleware, budget=budget)
    return budget
