"""``POST /v1/events/s3`` (MinIO webhook target, or anything posting S3 event records) and ``HEAD`` for MinIO's
liveness probe. No Ray: the runner arrives as an ``EventSink`` on ``app.state.event_sink``.

It answers 2xx as soon as the events are handed to the runner (MinIO treats anything else as a failed delivery and
queues the event for replay), and 401 JSON when ``PORTRAIT_EVENTS_TOKEN`` is set and the bearer token differs.
"""

import hmac
import logging
from typing import Protocol

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import Response
from pydantic import BaseModel

from deployments.common.errors import InputError, ServiceError
from serve_app.app_state import settings_of
from serve_app.bucket.events import ObjectEvent, created_events, parse_notification
from serve_app.schemas import ErrorOut
from serve_app.settings import Settings

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


class EventsOut(BaseModel):
    received: int  # object-created events in the body
    accepted: int  # (route, object) pairs handed to the runner; events matching no route are ignored


def install_event_routes(api: FastAPI) -> None:
    @api.post(
        "/v1/events/s3",
        response_model=EventsOut,
        responses={status: {"model": ErrorOut} for status in (401, 413, 422, 503)},
        tags=["events"],
    )
    async def s3_events(request: Request) -> EventsOut:
        """Bucket notifications: a MinIO webhook body or S3 event records. Processing continues after the answer."""
        _check_token(request, settings_of(request))
        body = await _read_body(request)
        events = created_events(parse_notification(body))
        sink: EventSink | None = getattr(request.app.state, "event_sink", None)
        if sink is None:
            raise RunnerUnavailable("the bucket runner is not deployed (application arg bucket_runner: false)")
        accepted = await sink.submit(events) if events else 0
        return EventsOut(received=len(events), accepted=accepted)

    @api.head("/v1/events/s3", tags=["events"])
    async def s3_events_probe() -> Response:
        """MinIO's liveness probe of a webhook target."""
        return Response(status_code=200)


def _check_token(request: Request, settings: Settings) -> None:
    if settings.events_token is None:
        return
    expected = f"Bearer {settings.events_token.get_secret_value()}".encode()
    given = request.headers.get("authorization", "").encode()
    if not hmac.compare_digest(given, expected):
        raise HTTPException(401, "missing or wrong bearer token for bucket events", {"WWW-Authenticate": "Bearer"})


async def _read_body(request: Request) -> bytes:
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_EVENT_BODY_BYTES:
            raise EventBodyTooLarge(f"event body larger than {MAX_EVENT_BODY_BYTES} bytes")
    return bytes(body)
