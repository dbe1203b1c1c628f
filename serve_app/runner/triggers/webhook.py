"""``POST /v1/events/s3`` (MinIO webhook target, or anything posting S3 event records) and ``HEAD`` for MinIO's
liveness probe. No Ray: the runner arrives as an ``EventSink`` on ``app.state.event_sink``.

It answers 2xx as soon as the events are handed to the runner (MinIO treats anything else as a failed delivery and
queues the event for replay). Secure by default: the ingress refuses to start the webhook without
``PORTRAIT_EVENTS_TOKEN`` unless the HTTP host is loopback (:func:`require_events_token`); with a token, a request
needs ``Authorization: Bearer <token>`` (scheme in any case, compared in constant time: 401 otherwise). Only JSON
bodies are read (415 otherwise: a browser's cross-site form POST cannot send ``application/json`` without a CORS
preflight), streamed under 1 MiB and the body deadline.
"""

import hashlib
import hmac
import logging
from typing import Protocol

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import Response
from pydantic import BaseModel

from deployments.common.errors import InputError, ServiceError
from serve_app.app_state import settings_of
from serve_app.auth.guard import is_loopback
from serve_app.runner.triggers.events import ObjectEvent, created_events, parse_notification
from serve_app.schemas import ErrorOut
from serve_app.settings import Settings
from serve_app.uploads import FixedCap, load_json, media_type, read_body

logger = logging.getLogger(__name__)

MAX_EVENT_BODY_BYTES = 1 << 20


class EventSink(Protocol):
    async def submit(self, events: list[ObjectEvent]) -> int:
        """Start processing ``events``; return how many (route, object) pairs were accepted."""
        ...


class RunnerUnavailable(ServiceError):
    code = "bucket_runner_unavailable"
    http_status = 503


class EventBodyTooLarge(InputError):
    code = "body_too_large"
    http_status = 413


class EventBodyNotJson(InputError):
    code = "unsupported_media_type"
    http_status = 415


class EventsTokenRequired(RuntimeError):
    """The webhook would be open to anyone who reaches the HTTP host: the ingress does not start."""


class EventsOut(BaseModel):
    received: int  # object-created events in the body
    accepted: int  # (route, object) pairs handed to the runner; events matching no route are ignored


def install_event_routes(api: FastAPI) -> None:
    @api.post(
        "/v1/events/s3",
        response_model=EventsOut,
        responses={status: {"model": ErrorOut} for status in (401, 408, 413, 415, 422, 503)},
        tags=["events"],
    )
    async def s3_events(request: Request) -> EventsOut:
        """Bucket notifications: a MinIO webhook body or S3 event records. Processing continues after the answer."""
        settings = settings_of(request)
        _check_token(request, settings)
        if media_type(request) != "application/json":
            raise EventBodyNotJson("bucket events are JSON: send them with Content-Type: application/json")
        cap = FixedCap(MAX_EVENT_BODY_BYTES, EventBodyTooLarge)
        body = await read_body(request, cap=cap, timeout_s=settings.body_timeout_s)
        events = created_events(parse_notification(load_json(body, "the event notification")))
        sink: EventSink | None = getattr(request.app.state, "event_sink", None)
        if sink is None:
            raise RunnerUnavailable("the bucket runner is not deployed (application arg bucket_runner: false)")
        accepted = await sink.submit(events) if events else 0
        return EventsOut(received=len(events), accepted=accepted)

    @api.head("/v1/events/s3", tags=["events"])
    async def s3_events_probe() -> Response:
        """MinIO's liveness probe of a webhook target."""
        return Response(status_code=200)


def require_events_token(settings: Settings, http_host: str) -> None:
    """Refuse to serve the webhook without a token on any host but loopback (called when the ingress starts)."""
    if settings.events_token is None and not is_loopback(http_host):
        raise EventsTokenRequired(
            f"the HTTP host is {http_host} and PORTRAIT_EVENTS_TOKEN is not set, so POST /v1/events/s3 would take "
            "bucket events from anyone who reaches it: set PORTRAIT_EVENTS_TOKEN (from a secret), listen on "
            "127.0.0.1, or deploy without the bucket runner (args.bucket_runner: false)"
        )


def _check_token(request: Request, settings: Settings) -> None:
    if settings.events_token is None:
        return  # a loopback host only: require_events_token stopped any other at start
    scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
    expected = settings.events_token.get_secret_value()
    if scheme.lower() != "bearer" or not _same_secret(credentials.strip(), expected):
        raise HTTPException(401, "missing or wrong bearer token for bucket events", {"WWW-Authenticate": "Bearer"})


def _same_secret(given: str, expected: str) -> bool:
    """Compared as digests: the time taken tells neither the content nor the length of the token."""
    digest = hashlib.sha256
    return hmac.compare_digest(digest(given.encode()).digest(), digest(expected.encode()).digest())
