"""Per-object callbacks of bucket routes with ``callback_url``: each object's record, POSTed and signed like job
callbacks (``args.jobs.callback_secret``; the same address rules and backoff).

A callback survives a runner restart: before its first try it is written to the route's output
(``RecordNames.callback``, the key and until when to retry) and removed once delivered or given up; a runner that
starts resumes every one it finds there. What is still lost is a restart in the moment between an object's record
and its callback being written (the next scan sees the record and does not redo the object). Delivery is at least
once, as for jobs: a restart mid-delivery sends again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterable

from pydantic import BaseModel, ValidationError

from deployments.common.errors import InvalidParameter
from serve_app.runner.background import Background
from serve_app.runner.callbacks import Poster, callback_poster, deliver
from serve_app.runner.jobs_config import JobsConfig
from serve_app.runner.outcomes import ObjectOutcome, Status
from serve_app.runner.records import RECORD_CONTENT_TYPE, ResultRecord, find_records, record_names
from serve_app.runner.routing import Route
from storage.base import ObjectStore, open_store
from storage.errors import ObjectNotFound, ObjectTooLarge
from storage.keys import CALLBACK_SUFFIX, HASHED_FOLDER

logger = logging.getLogger(__name__)

MAX_PENDING_BYTES = 64 * 1024  # a pending callback is a key and a time; more is not ours


class PendingCallback(BaseModel):
    """A callback still to deliver, as stored in the route's output."""

    route: str
    key: str
    deadline_s: float  # unix time: retried until then


class RouteCallbacks:
    def __init__(self, routes: Iterable[Route], config: JobsConfig, *, post: Poster | None = None) -> None:
        self._routes = {route.name: route for route in routes if route.callback_url}
        if self._routes and config.callback_secret is None:
            raise InvalidParameter(
                f"routes {sorted(self._routes)} have a callback_url: set args.jobs.callback_secret to sign them"
            )
        self._config = config
        self._post = post or callback_poster(config)
        self._outputs = {name: open_store(route.output, route.store) for name, route in self._routes.items()}
        self._sending = Background("a bucket route's callback")

    def observe(self, outcome: ObjectOutcome) -> None:
        route = self._routes.get(outcome.route)
        if route is not None and outcome.status in (Status.DONE, Status.FAILED):
            pending = PendingCallback(
                route=route.name, key=outcome.key, deadline_s=time.time() + self._config.callback_retry_s
            )
            self._sending.spawn(self._write_and_send(route, pending))

    def resume(self) -> None:
        """Send again the callbacks an earlier runner left undelivered in each route's output (on start)."""
        for route in self._routes.values():
            self._sending.spawn(self._resume(route))

    async def drain(self) -> None:
        await self._sending.drain()

    async def _write_and_send(self, route: Route, pending: PendingCallback) -> None:
        output = self._outputs[route.name]
        body = pending.model_dump_json().encode("utf-8")
        name = record_names(pending.key).callback
        await asyncio.to_thread(output.put, name, body, content_type=RECORD_CONTENT_TYPE)
        await self._send(route, pending)

    async def _resume(self, route: Route) -> None:
        output = self._outputs[route.name]
        found = await asyncio.to_thread(lambda: list(output.list(f"{HASHED_FOLDER}/", suffix=CALLBACK_SUFFIX)))
        for info in found:
            pending = await asyncio.to_thread(_read_pending, output, info.key)
            if pending is None or pending.route != route.name:
                continue
            if pending.deadline_s <= time.time():
                logger.warning(
                    "route %s: the callback for %r was not delivered in time; given up", route.name, pending.key
                )
                await asyncio.to_thread(output.delete, info.key)
                continue
            self._sending.spawn(self._send(route, pending))
        if found:
            logger.info("route %s: %d undelivered callbacks found", route.name, len(found))

    async def _send(self, route: Route, pending: PendingCallback) -> None:
        """Deliver, then remove the stored callback (a failure before that leaves it for the next start)."""
        output = self._outputs[route.name]
        names = record_names(pending.key)
        records = await asyncio.to_thread(find_records, output, names)
        status = "succeeded" if any(isinstance(record, ResultRecord) for record in records) else "failed"
        body = {
            "route": route.name,
            "key": pending.key,
            "status": status,
            "records": [record.model_dump(mode="json") for record in records],
        }
        secret = self._config.callback_secret.get_secret_value() if self._config.callback_secret else ""
        delivery = await deliver(
            route.callback_url or "",
            json.dumps(body, separators=(",", ":")).encode("utf-8"),
            secret,
            config=self._config,
            deadline_s=pending.deadline_s,
            timeout_s=self._config.callback_timeout_s,
            post=self._post,
        )
        if not delivery.delivered:
            logger.warning(
                "route %s: the callback for %r failed %d times (%s); given up",
                route.name,
                pending.key,
                delivery.attempts,
                delivery.last_error,
            )
        await asyncio.to_thread(output.delete, names.callback)


def _read_pending(output: ObjectStore, name: str) -> PendingCallback | None:
    """The stored callback; ``None`` when it is gone, or (logged) not one of ours."""
    try:
        return PendingCallback.model_validate_json(output.get(name, max_bytes=MAX_PENDING_BYTES).data)
    except ObjectNotFound:  # delivered meanwhile (by a send still running, or another runner)
        return None
    except (ValidationError, ObjectTooLarge) as exc:
        logger.warning("%s is not a pending callback (%s); left as it is", name, exc)
        return None
