"""Per-object callbacks of bucket routes with ``callback_url``: each object's record, POSTed and signed like job
callbacks (the app's secret: ``PORTRAIT_CALLBACK_SECRET`` or ``args.jobs.callback_secret_file``; the same address
rules and backoff).

A callback survives a runner restart: before its first try it is written to the route's output
(``RecordNames.callback``, the key and until when to retry) and removed once delivered or given up; a runner that
starts resumes every one it finds there. The sending is held by the runner's ``CallbackQueue``, with the jobs'
endings: one that finds it full waits in that file, and ``_refill`` (the same listing as a start's) takes it up.
What is still lost is a restart in the moment between an object's record and its callback being written (the next
scan sees the record and does not redo the object). Delivery is at least once, as for jobs: a restart mid-delivery
sends again.
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
from serve_app.runner.callback_queue import CallbackQueue, next_chunk
from serve_app.runner.callbacks import Poster, callback_poster, deliver
from serve_app.runner.jobs_config import CALLBACK_SECRET_ENV, JobsConfig
from serve_app.runner.outcomes import ObjectOutcome, Status
from serve_app.runner.records import RECORD_CONTENT_TYPE, ResultRecord, find_records, record_names
from serve_app.runner.routing import Route
from storage.base import ObjectStore, open_store
from storage.errors import ObjectNotFound, ObjectTooLarge
from storage.keys import CALLBACK_SUFFIX, HASHED_FOLDER

logger = logging.getLogger(__name__)

MAX_PENDING_BYTES = 64 * 1024  # a pending callback is a key and a time; more is not ours
SOURCE = "bucket routes"  # their callbacks in the callback queue


class PendingCallback(BaseModel):
    """A callback still to deliver, as stored in the route's output."""

    route: str
    key: str
    deadline_s: float  # unix time: retried until then


class RouteCallbacks:
    def __init__(
        self,
        routes: Iterable[Route],
        config: JobsConfig,
        *,
        post: Poster | None = None,
        queue: CallbackQueue | None = None,
    ) -> None:
        self._routes = {route.name: route for route in routes if route.callback_url}
        self._secret = config.signing_secret() if self._routes else None
        if self._routes and self._secret is None:
            raise InvalidParameter(
                f"routes {sorted(self._routes)} have a callback_url: set {CALLBACK_SECRET_ENV} (or "
                "args.jobs.callback_secret_file) where the bucket runner runs, to sign them"
            )
        self._config = config
        self._post = post or callback_poster(config)
        self._outputs = {name: open_store(route.output, route.store) for name, route in self._routes.items()}
        # the runner's, shared with the jobs' endings
        self._queue = queue if queue is not None else CallbackQueue.of(config)
        self._storing = Background("storing a bucket route's callback")  # one write each, then offered to the queue
        self._held: set[tuple[str, str]] = set()  # (route, callback file) being sent

    def observe(self, outcome: ObjectOutcome) -> None:
        route = self._routes.get(outcome.route)
        if route is not None and outcome.status in (Status.DONE, Status.FAILED):
            pending = PendingCallback(
                route=route.name, key=outcome.key, deadline_s=time.time() + self._config.callback_retry_s
            )
            self._storing.spawn(self._store(route, pending))

    def resume(self) -> None:
        """Send again the callbacks an earlier runner left undelivered in each route's output (on start)."""
        self._storing.spawn(self._refill())

    async def drain(self) -> None:
        await self._storing.drain()
        await self._queue.drain()

    async def _store(self, route: Route, pending: PendingCallback) -> None:
        """Write the callback to the route's output, then offer it to the queue (full: it waits there)."""
        output = self._outputs[route.name]
        body = pending.model_dump_json().encode("utf-8")
        name = record_names(pending.key).callback
        await asyncio.to_thread(output.put, name, body, content_type=RECORD_CONTENT_TYPE)
        self._offer(route, pending)

    def _offer(self, route: Route, pending: PendingCallback) -> bool:
        held = (route.name, record_names(pending.key).callback)
        if held in self._held:
            return True
        key = f"route {route.name} {held[1]}"
        if not self._queue.hold(key, lambda: self._send(route, pending), source=SOURCE, refill=self._refill):
            return False
        self._held.add(held)
        return True

    async def _refill(self) -> None:
        """Offer the callbacks stored in each route's output that are not being sent, until the queue is full (a
        runner's start, and whenever the queue had no room): past their retry time, they are given up."""
        for route in self._routes.values():
            output = self._outputs[route.name]
            stored = output.list(f"{HASHED_FOLDER}/", suffix=CALLBACK_SUFFIX)
            while chunk := await next_chunk(stored):
                for info in chunk:
                    if (route.name, info.key) not in self._held and not await self._take_up(route, output, info.key):
                        return

    async def _take_up(self, route: Route, output: ObjectStore, name: str) -> bool:
        """Offer the callback stored as ``name`` (given up past its retry time); False when the queue is full."""
        pending = await asyncio.to_thread(_read_pending, output, name)
        if pending is None or pending.route != route.name:
            return True
        if pending.deadline_s <= time.time():
            logger.warning("route %s: the callback for %r was not delivered in time; given up", route.name, pending.key)
            await asyncio.to_thread(output.delete, name)
            return True
        return self._offer(route, pending)

    async def _send(self, route: Route, pending: PendingCallback) -> None:
        """Deliver, then remove the stored callback (a failure before that leaves it for the next start)."""
        names = record_names(pending.key)
        try:
            await self._deliver(route, pending)
        finally:
            self._held.discard((route.name, names.callback))

    async def _deliver(self, route: Route, pending: PendingCallback) -> None:
        output = self._outputs[route.name]
        names = record_names(pending.key)
        records = await asyncio.to_thread(find_records, output, names)
        status = "succeeded" if any(isinstance(record, ResultRecord) for record in records) else "failed"
        body = {
            "route": route.name,
            "key": pending.key,
            "status": status,
            "records": [record.model_dump(mode="json") for record in records],
            "callback_url": route.callback_url,  # signed: the receiver it was meant for
        }
        secret = self._secret.get_secret_value() if self._secret else ""
        delivery = await deliver(
            route.callback_url or "",
            json.dumps(body, separators=(",", ":")).encode("utf-8"),
            secret,
            config=self._config,
            deadline_s=pending.deadline_s,
            timeout_s=self._config.callback_timeout_s,
            post=self._post,
            slots=self._queue.slots,
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
