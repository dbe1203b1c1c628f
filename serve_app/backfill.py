"""``portrait process``: run a job over every object under a prefix (or every file in a folder) that exists already.

It reuses the bucket runner's worker whole (one ad-hoc route, the same idempotency, records, retries and error
records), with jobs executed by the running service's HTTP API (``--url``) or, with ``--local``, by the engines
in this process. Objects that already have a record for their ETag are skipped, so a rerun only does what is left.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TextIO

from deployments.common.errors import InputError, InvalidParameter, ServiceError
from deployments.common.params import JobParams
from serve_app.jobs import JobContext
from serve_app.jobs.results import JobResult
from serve_app.registry import job_entry
from serve_app.runner.leases import new_holder
from serve_app.runner.outcomes import ObjectOutcome, Status
from serve_app.runner.routing import BucketRoute, RoutingTable, resolve_route
from serve_app.runner.worker import BucketWorker, JobExecutor
from storage.base import StoreSettings, parse_location

logger = logging.getLogger(__name__)

HTTP_TIMEOUT_S = 300.0


class RemoteInputError(InputError):
    """The service refused the object (4xx); keeps the service's own error code for the error record."""

    def __init__(self, code: str, message: str, status: int, details: dict[str, Any] | None = None) -> None:
        super().__init__(message, details=details)
        self.code = code
        self.http_status = status


class RemoteServiceError(ServiceError):
    """The service failed on its side (5xx, 429): transient, retried."""


@dataclass(frozen=True)
class BackfillSummary:
    counts: Mapping[str, int]
    elapsed_s: float

    @property
    def ok(self) -> bool:
        return not self.counts.get(Status.FAILED.value) and not self.counts.get(Status.DEFERRED.value)


def http_executor(url: str, *, timeout_s: float = HTTP_TIMEOUT_S) -> JobExecutor:
    """Run jobs through the service's API: ``POST {url}`` + the job's route ``?{options}&return=json`` with the
    object's bytes as the body (raw, not base64 in JSON: a photo the byte limit allows is never refused for the
    encoding's growth). The options sent are those the route and the object set, not their defaults: what the service
    validates is what was asked for (a default beside an option that excludes it is no question)."""
    base = url.rstrip("/")

    async def execute(task: str, data: bytes, params: JobParams) -> JobResult:
        fields = params.model_dump(mode="json", by_alias=True, exclude_unset=True) | {"return": "json"}
        query = urllib.parse.urlencode({name: _query_value(value) for name, value in fields.items()})
        answer = await asyncio.to_thread(_post_image, f"{base}{job_entry(task).route}?{query}", data, timeout_s)
        return JobResult.from_json(answer)

    return execute


def _query_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)  # true/false, numbers as JSON writes them


def _post_image(url: str, body: bytes, timeout_s: float) -> dict[str, Any]:
    headers = {"Content-Type": "application/octet-stream"}
    request = urllib.request.Request(url, data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as reply:
            return json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        raise _remote_error(exc.code, exc.read()) from None
    except urllib.error.URLError as exc:  # refused, DNS, reset: the service is not (yet) there
        raise ConnectionError(f"{url}: {exc.reason}") from exc


def _remote_error(status: int, payload: bytes) -> Exception:
    try:
        error = json.loads(payload)["error"]
        code, message, details = error["code"], error["message"], error.get("details")
    except (ValueError, KeyError, TypeError):
        code, message, details = "http_error", payload[:300].decode("utf-8", "replace"), None
    if 400 <= status < 500 and status not in (408, 429):
        return RemoteInputError(code, message, status, details)
    return RemoteServiceError(f"HTTP {status} {code}: {message}")


def default_output(source: str) -> str:
    """``<source>-results`` beside the input folder or prefix."""
    location = parse_location(source)
    if location.scheme == "file":
        return f"{location.bucket.rstrip('/')}-results"
    if not location.prefix:
        raise InvalidParameter("--out is required when the source is a whole bucket")
    return f"s3://{location.bucket}/{location.prefix}-results"


async def backfill(
    source: str,
    task: str,
    *,
    execute: JobExecutor,
    context: JobContext,
    params: Mapping[str, Any] | None = None,
    out: str | None = None,
    store: StoreSettings | None = None,
    concurrency: int = 4,
    progress: ProgressBar | None = None,
) -> BackfillSummary:
    spec = BucketRoute(
        name="backfill",
        input=source,
        output=out or default_output(source),
        task=task,
        params=dict(params or {}),
        suffixes=(),  # every object: what is not an image gets an error record, as in a bucket route
        store=store or StoreSettings(),
    )
    route = resolve_route(spec, context)
    counts: Counter[str] = Counter()

    def on_outcome(outcome: ObjectOutcome) -> None:  # counted as they come: a scan of millions keeps no list
        counts[outcome.status.value] += 1
        if progress:
            progress.update(outcome)

    # Claims of its own: an object a running bucket runner is processing is left to it (``in_progress``).
    worker = BucketWorker(
        RoutingTable([route]),
        execute,
        context,
        max_concurrency=concurrency,
        on_outcome=on_outcome,
        holder=f"portrait-process/{new_holder()}",
    )
    await worker.require_claims()
    started = time.perf_counter()
    await worker.reconcile(route, on_listed=progress.add if progress else None, keep_outcomes=False)
    if progress:
        progress.close()
    return BackfillSummary(counts, time.perf_counter() - started)


class ProgressBar:
    """``[#####.....] 12/200  done 10  skipped 0  failed 2  deferred 0  3.4/s`` on one line of ``stream``."""

    def __init__(self, stream: TextIO = sys.stderr, *, width: int = 30, min_redraw_s: float = 0.1) -> None:
        self._stream = stream
        self._width = width
        self._min_redraw_s = min_redraw_s
        self._total = 0
        self._counts: Counter[str] = Counter()
        self._started = time.perf_counter()
        self._drawn_at = 0.0

    def add(self, count: int) -> None:
        """``count`` more objects to check (a scan lists its input chunk by chunk)."""
        self._total += count
        self._draw(force=True)

    def update(self, outcome: ObjectOutcome) -> None:
        self._counts[outcome.status.value] += 1
        self._draw(force=False)

    def close(self) -> None:
        self._draw(force=True)
        self._stream.write("\n")
        self._stream.flush()

    def line(self) -> str:
        finished = sum(self._counts.values())
        filled = int(self._width * finished / self._total) if self._total else self._width
        rate = finished / max(time.perf_counter() - self._started, 1e-9)
        counts = "  ".join(f"{status.value} {self._counts[status.value]}" for status in Status)
        return f"[{'#' * filled}{'.' * (self._width - filled)}] {finished}/{self._total}  {counts}  {rate:.1f}/s"

    def _draw(self, *, force: bool) -> None:
        now = time.perf_counter()
        if not force and now - self._drawn_at < self._min_redraw_s:
            return
        self._drawn_at = now
        self._stream.write("\r" + self.line())
        self._stream.flush()
