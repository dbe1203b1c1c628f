"""The key guard: one ASGI middleware in front of every route, so a route added later is covered without a line.

With keys configured (``app_state.gate_of``), every path under ``/v1/`` and ``/api/`` (the job routes, the
OpenAI-compatible routes, the jobs API and the page's calls) and HivisionIDPhotos' paths (``/idphoto``...)
needs ``Authorization: Bearer <key>`` or ``X-API-Key``:
401 ``unauthorized`` without one, 429 ``rate_limited``/``quota_exceeded`` with ``Retry-After`` over the key's limits.
A POST spends one job of the daily quota; every request spends one token of the rate. ``/v1/events/s3`` keeps its
own token, the page and ``/livez`` stay open, and ``/healthz`` answers in full only to a key (``shows_details``).
The task check (403) happens where the task is known: ``require_task`` in the job registry and the jobs API.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from ipaddress import ip_address

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from deployments.common.errors import PortraitError
from serve_app.app_state import gate_of
from serve_app.auth.caller import acting_as, current_key
from serve_app.auth.errors import QuotaExceeded, RateLimited, Unauthorized
from serve_app.auth.keys import ApiKey, KeyRing
from serve_app.auth.limits import Limiter
from serve_app.errors import error_body
from serve_app.hivision_wire import HIVISION_PATHS

logger = logging.getLogger(__name__)

PROTECTED_PREFIXES = ("/v1/", "/api/", *HIVISION_PATHS)
OPEN_PREFIXES = ("/v1/events/",)  # the bucket webhook checks PORTRAIT_EVENTS_TOKEN itself
_CHALLENGE = 'Bearer realm="portrait"'


@dataclass(frozen=True)
class Gate:
    """The configured keys and where their limits are kept."""

    keys: KeyRing
    limiter: Limiter


def install_key_guard(api: FastAPI) -> None:
    api.add_middleware(KeyGuard)


def shows_details(request: Request) -> bool:
    """Whether an open route may answer in full: no keys configured, or the request carries a valid key."""
    gate = gate_of(request.app)
    return gate is None or not len(gate.keys) or current_key() is not None


def warn_when_open(keys: KeyRing, host: str) -> bool:
    """Log one warning when the service listens beyond loopback without keys; True when it did."""
    if len(keys) or is_loopback(host):
        return False
    logger.warning(
        "no API keys configured (args.auth) and the HTTP host is %s: every job route is open to whoever reaches it",
        host,
    )
    return True


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ip_address(host).is_loopback
    except ValueError:
        return False


class KeyGuard:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        gate = gate_of(scope["app"]) if scope["type"] == "http" else None
        if gate is None or not len(gate.keys):
            await self.app(scope, receive, send)
            return
        token = _token_of(scope)
        key = gate.keys.find(token) if token else None
        path: str = scope["path"]
        if path.startswith(PROTECTED_PREFIXES) and not path.startswith(OPEN_PREFIXES):
            try:
                await _admit(gate, key, token, job=scope["method"] == "POST")
            except PortraitError as exc:
                await _refusal(exc)(scope, receive, send)
                return
        with acting_as(key):
            await self.app(scope, receive, send)


async def _admit(gate: Gate, key: ApiKey | None, token: str | None, *, job: bool) -> None:
    """Raise why a request may not pass: no valid key, or over the key's rate or quota."""
    if key is None:
        reason = "the API key is not valid" if token else "this service needs an API key"
        raise Unauthorized(f"{reason}: send Authorization: Bearer <key> (or X-API-Key: <key>)")
    decision = await gate.limiter.take(key, job=job)
    if decision.allowed:
        return
    details = {"retry_after_s": round(decision.retry_after_s, 3)}
    if decision.code == "quota_exceeded":
        raise QuotaExceeded(f"key {key.id!r} has spent its daily quota; it renews at 00:00 UTC", details=details)
    raise RateLimited(f"key {key.id!r} is over its rate limit", details=details)


def _refusal(exc: PortraitError) -> JSONResponse:
    headers = {}
    if isinstance(exc, Unauthorized):
        headers["WWW-Authenticate"] = _CHALLENGE
    if "retry_after_s" in exc.details:
        headers["Retry-After"] = str(max(1, math.ceil(exc.details["retry_after_s"])))
    return JSONResponse(error_body(exc.code, exc.message, exc.details), status_code=exc.http_status, headers=headers)


def _token_of(scope: Scope) -> str | None:
    headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
    scheme, _, credentials = headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    api_key = headers.get("x-api-key", "").strip()
    return api_key or None
