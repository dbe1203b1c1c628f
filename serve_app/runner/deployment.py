"""``BucketRunner``: the bucket-event trigger of the pipeline graph, one replica. The only Ray code of the runner.

It holds the same model handles as the ingress and runs jobs in-process through them (``handle_backend``), never
through its own HTTP endpoint. ``user_config`` (validated in ``reconfigure``, loop check included):

    routes: [ {name, input, output, task, params, suffixes, event_bucket, poll, store}, ... ]
    poll_interval_s: 10          # how often polled routes (local folders by default) are listed
    max_concurrency: 4           # objects in flight; more events wait instead of being dropped
    max_pending: 10000           # webhook objects queued (deduplicated); past it the webhook answers 503
    scan_chunk: 256              # a scan checks its listing this many objects at a time
    job_timeout_s: 300
    retry: {max_attempts: 4, initial_backoff_s: 0.5, max_backoff_s: 10}
    sqs: {queue_url, region, endpoint_url, wait_time_s: 20, visibility_timeout_s: 900}   # optional

On (re)configuration every route is reconciled once, so uploads made while the service was down are processed.
The new worker takes over the old one's locks and queued objects: an object the old worker is still processing is
not started again (the new worker waits for it, then finds its record).
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any

import ray
from pydantic import ValidationError
from ray import serve
from ray.exceptions import ActorDiedError, ActorUnavailableError, GetTimeoutError, RayActorError
from ray.serve.exceptions import BackPressureError, DeploymentUnavailableError, ReplicaUnavailableError
from ray.serve.handle import DeploymentHandle

from deployments.common.deployment import record_event_lag, record_retention_deleted
from deployments.common.errors import InvalidParameter, ServiceError
from serve_app.auth import AuthConfig, load_keys
from serve_app.handles import Stages, app_language_model, handle_backend
from serve_app.jobs import JOBS, job_context
from serve_app.llm import LlmRoute
from serve_app.runner.callback_queue import CallbackQueue
from serve_app.runner.config import RunnerConfig
from serve_app.runner.folders import buckets_root, require_input_folders
from serve_app.runner.jobs_config import JobsConfig, require_shared_store
from serve_app.runner.jobs_layout import JobRef
from serve_app.runner.jobs_runner import JobsRunner, job_routes
from serve_app.runner.jobs_store import JobStore
from serve_app.runner.outcomes import ObjectOutcome, Status, is_transient
from serve_app.runner.retention import sweep_forever, sweep_route
from serve_app.runner.route_callbacks import RouteCallbacks
from serve_app.runner.routing import build_routing_table
from serve_app.runner.triggers.events import ObjectEvent
from serve_app.runner.triggers.sqs import SqsConsumer
from serve_app.runner.worker import BucketWorker, job_executor
from serve_app.settings import get_settings

logger = logging.getLogger(__name__)

# A replica restarting or overloaded: worth retrying, never the caller's fault.
RAY_TRANSIENT = (
    RayActorError,
    ActorDiedError,
    ActorUnavailableError,
    GetTimeoutError,
    BackPressureError,
    DeploymentUnavailableError,
    ReplicaUnavailableError,
)


def is_transient_in_ray(exc: BaseException) -> bool:
    return is_transient(exc) or isinstance(exc, RAY_TRANSIENT)


def _alive_nodes() -> int:
    return sum(1 for node in ray.nodes() if node.get("Alive"))


def _observe_outcome(outcome: ObjectOutcome) -> None:
    if outcome.status is Status.DONE and outcome.lag_s is not None:
        record_event_lag(outcome.route, outcome.lag_s)


@serve.deployment(name="BucketRunner", num_replicas=1)
class BucketRunner:
    def __init__(
        self,
        stages: Stages,
        jobs: JobsConfig | None = None,
        auth: AuthConfig | None = None,
        llm: DeploymentHandle | None = None,
        llm_route: LlmRoute | None = None,
    ) -> None:
        settings = get_settings()
        language_model = app_language_model(llm_route, llm)
        self._backend = handle_backend(stages, settings.open_model_store().manifest, llm=language_model)
        self._context = job_context(settings)
        self._buckets_root = settings.buckets_root
        self._config = RunnerConfig()
        self._worker: BucketWorker | None = None
        self._sqs: SqsConsumer | None = None
        self._loops: list[asyncio.Task[None]] = []
        self._jobs: JobsRunner | None = None
        self._jobs_config = jobs or JobsConfig()
        # What receivers can make this one replica hold: job endings and bucket-route callbacks together.
        self._callbacks = CallbackQueue.of(self._jobs_config)
        if jobs is not None:  # the jobs API's work: its routes join the table, its endings come through _observe
            store = JobStore(jobs.location(self._buckets_root), jobs.s3, JOBS)
            store.prepare()
            keys = load_keys(auth or AuthConfig())
            self._jobs = JobsRunner(jobs, store, keys, queue=self._callbacks)
        self._route_callbacks: RouteCallbacks | None = None

    async def reconfigure(self, user_config: dict[str, Any]) -> None:
        try:
            config = RunnerConfig.model_validate(user_config or {})
        except ValidationError as exc:
            raise InvalidParameter(f"BucketRunner user_config: {exc}") from None
        nodes = await asyncio.to_thread(_alive_nodes)
        root = buckets_root(config.routes, self._buckets_root, nodes=nodes)
        require_shared_store(self._jobs_config, self._buckets_root, nodes=nodes)
        jobs_routes = job_routes(self._jobs.config, self._jobs.store, JOBS) if self._jobs else []
        table = build_routing_table([*config.routes, *jobs_routes], self._context, base_dir=root)
        require_input_folders(table, node=f"{socket.gethostname()} ({ray.get_runtime_context().get_node_id()[:12]})")
        old = self._worker
        worker = BucketWorker(
            table,
            job_executor(self._backend, self._context),
            self._context,
            max_concurrency=config.max_concurrency,
            max_pending=config.max_pending,
            scan_chunk=config.scan_chunk,
            retry=config.retry,
            job_timeout_s=config.job_timeout_s,
            transient=is_transient_in_ray,
            on_outcome=self._observe,
            locks=old.locks if old else None,
        )
        await worker.require_claims()
        self._route_callbacks = RouteCallbacks(table.routes, self._jobs_config, queue=self._callbacks)
        if old is None:  # this runner's start: what an earlier one left undelivered
            self._route_callbacks.resume()
        for loop in self._loops:  # the previous worker's loops stop; its in-flight objects finish, under its locks
            loop.cancel()
        self._config, self._worker = config, worker
        if old is not None:
            worker.adopt(old.close())
        self._sqs = SqsConsumer(worker, config.sqs) if config.sqs else None
        self._loops = [asyncio.create_task(worker.poll_forever(config.poll_interval_s), name="bucket-poller")]
        if self._sqs is not None:
            self._loops.append(asyncio.create_task(self._sqs.run_forever(), name="sqs-consumer"))
        sweeps = {"bucket": lambda now: sum(sweep_route(route, now) for route in table.routes if route.retention_s)}
        if self._jobs is not None:
            self._jobs.attach(worker)
            sweeps["job"] = self._jobs.sweep
        interval_s = self._jobs_config.sweep_interval_s
        sweeping = sweep_forever(sweeps, interval_s, record_retention_deleted)
        self._loops.append(asyncio.create_task(sweeping, name="retention-sweep"))
        logger.info("BucketRunner: %d routes %s, sqs=%s", len(table), [r.name for r in table.routes], bool(config.sqs))

    async def submit(self, events: list[ObjectEvent]) -> int:
        """Hand events to the worker and return at once; the objects are processed in background tasks."""
        if self._worker is None:
            return 0
        return self._worker.submit(events)

    async def enqueue_job(self, task: str, owner: str, job_id: str) -> str | None:
        """Queue a job the ingress stored; the refusal's message when the queue is full (the ingress answers 503)."""
        if self._jobs is None:
            return "the jobs API is not configured on this runner"
        try:
            self._jobs.enqueue(task, JobRef(owner, job_id))
        except ServiceError as exc:  # the jobs queue, or the worker's own queue, is full
            return exc.message
        return None

    def _observe(self, outcome: ObjectOutcome) -> None:
        _observe_outcome(outcome)
        if self._jobs is not None:
            self._jobs.observe(outcome)
        if self._route_callbacks is not None:
            self._route_callbacks.observe(outcome)

    async def health(self) -> dict[str, Any]:
        """``failing`` when a trigger loop died, ``degraded`` when a route's last scan failed; each route's state."""
        worker = self._worker
        states = worker.route_states() if worker else {}
        routes = [
            {
                "name": r.name,
                "input": str(r.input),
                "output": str(r.output),
                "task": r.task,
                "poll": r.poll,
                **states[r.name].to_json(),
            }
            for r in (worker.table.routes if worker else ())
        ]
        if any(loop.done() for loop in self._loops):
            status, reason = "failing", "a trigger loop (poller or SQS consumer) stopped"
        elif any(state.scan_failing for state in states.values()):
            status, reason = "degraded", "the last scan of a route failed (see routes[].last_error)"
        else:
            status, reason = "ok", None
        return {
            "status": status,
            **({"reason": reason} if reason else {}),
            "routes": routes,
            "in_flight": worker.in_flight if worker else 0,
            "jobs_queued": self._jobs.queued if self._jobs else None,
            "callbacks_held": len(self._callbacks),
            "outcomes": dict(worker.counts) if worker else {},
            "sqs": {"deleted": self._sqs.deleted, "kept": self._sqs.kept} if self._sqs else None,
            "config": {k: v for k, v in self._config.model_dump().items() if k not in ("routes", "sqs")},
        }
