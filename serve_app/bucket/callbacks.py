"""Per-object callbacks of bucket routes with ``callback_url``: each object's record, POSTed and signed like job
callbacks (``args.jobs.callback_secret``; the same address rules and backoff). Kept in memory: a runner restart
forgets the callbacks still being retried (a job's callback, by contrast, survives it)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterable

from deployments.common.errors import InvalidParameter
from serve_app.bucket.outcomes import ObjectOutcome, Status
from serve_app.bucket.records import ResultRecord, find_records, record_names
from serve_app.bucket.routing import Route
from serve_app.jobs_api.background import Background
from serve_app.jobs_api.callbacks import Poster, callback_poster, deliver
from serve_app.jobs_api.config import JobsConfig
from storage.base import open_store


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
            self._sending.spawn(self._send(route, outcome.key))

    async def drain(self) -> None:
        await self._sending.drain()

    async def _send(self, route: Route, key: str) -> None:
        records = await asyncio.to_thread(find_records, self._outputs[route.name], record_names(key))
        status = "succeeded" if any(isinstance(record, ResultRecord) for record in records) else "failed"
        body = {
            "route": route.name,
            "key": key,
            "status": status,
            "records": [record.model_dump(mode="json") for record in records],
        }
        secret = self._config.callback_secret.get_secret_value() if self._config.callback_secret else ""
        await deliver(
            route.callback_url or "",
            json.dumps(body, separators=(",", ":")).encode("utf-8"),
            secret,
            config=self._config,
            deadline_s=time.time() + self._config.callback_retry_s,
            timeout_s=self._config.callback_timeout_s,
            post=self._post,
        )
