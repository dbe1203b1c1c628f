"""The jobs API in-process: the real app and engines, the bucket worker and the jobs runner in the test client's event
loop, a jobs store in a temp folder, callbacks captured instead of sent."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest
from fastapi.testclient import TestClient

from serve_app.auth import ApiKeyIn, Gate, KeyRing, LimitBook, LocalLimiter, hash_key
from serve_app.jobs import JOBS
from serve_app.jobs_api import JobsService, LocalJobQueue, jobs_service
from serve_app.routes import create_api
from serve_app.runner.callbacks import Target
from serve_app.runner.jobs_config import JobsConfig
from serve_app.runner.jobs_runner import JobsRunner, job_routes
from serve_app.runner.jobs_store import JobStore
from serve_app.runner.routing import build_routing_table
from serve_app.runner.worker import BucketWorker, job_executor
from serve_app.settings import Settings
from tests.unit.runner.bucket_fixtures import faceless_png, job_ctx, local_backend, photo_jpeg  # noqa: F401

SECRET = "app-secret"
KEYS = {"pk_a": {"id": "alice", "callback_secret": "alice-secret"}, "pk_b": {"id": "bob", "tasks": ["idphoto"]}}


@dataclass
class Receiver:
    """Callbacks as the service would POST them (to the address it resolved and checked). With a ``gate``, each POST
    waits for it to be set; ``in_flight`` and ``peak`` count the POSTs under way."""

    calls: list[tuple[Target, bytes, dict[str, str]]] = field(default_factory=list)
    status: int = 200
    gate: asyncio.Event | None = None
    in_flight: int = 0
    peak: int = 0

    async def post(self, target: Target, body: bytes, headers: dict[str, str], timeout_s: float) -> int:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            if self.gate is not None:
                await self.gate.wait()
            self.calls.append((target, body, headers))
            return self.status
        finally:
            self.in_flight -= 1


@dataclass
class JobsApp:
    client: TestClient
    store: JobStore
    runner: JobsRunner
    worker: BucketWorker
    service: JobsService
    receiver: Receiver

    def wait(self, job_id: str, headers: dict[str, str] | None = None) -> dict:
        """The job once it has ended and its callback (if any) went out."""
        for _ in range(600):
            body = self.client.get(f"/v1/jobs/{job_id}", headers=headers or {}).json()
            if body.get("status") in ("succeeded", "failed", "cancelled") and self.runner.settled:
                return body
            self.client.portal.call(asyncio.sleep, 0.05)
        raise AssertionError(f"job {job_id} did not end: {body}")


def make_jobs_app(
    tmp_path,
    backend,
    context,
    *,
    keys: dict | None = None,
    send_callbacks: bool = False,
    http_host: str = "127.0.0.1",
    **config,
) -> JobsApp:
    """``send_callbacks``: callbacks go out over the network (``callback_poster``), not to ``receiver``;
    ``http_host``: where the ingress would listen (the jobs API is built as it builds it)."""
    settings = {"store": str(tmp_path / "jobs"), "callback_secret": SECRET, "callback_hosts": ["127.0.0.1"]}
    jobs = JobsConfig.model_validate({**settings, **config})
    store = JobStore(jobs.location(None), jobs.s3, JOBS)
    store.prepare()
    ring = KeyRing([ApiKeyIn.model_validate({**spec, "sha256": hash_key(t)}) for t, spec in (keys or {}).items()])
    receiver = Receiver()
    runner = JobsRunner(jobs, store, ring, post=None if send_callbacks else receiver.post)
    table = build_routing_table(job_routes(jobs, store, JOBS), context)
    worker = BucketWorker(table, job_executor(backend, context), context, on_outcome=runner.observe)
    runner.attach(worker)
    service = jobs_service(jobs, store, LocalJobQueue(runner), keys=ring, http_host=http_host)
    app = create_api()
    app.state.backend = backend
    app.state.settings = Settings()
    app.state.jobs = service
    if keys:
        app.state.gate = Gate(ring, LocalLimiter(LimitBook()))
    client = TestClient(app, raise_server_exceptions=False)
    return JobsApp(client, store, runner, worker, service, receiver)


@pytest.fixture
def jobs_app(tmp_path, local_backend, job_ctx):  # noqa: F811
    app = make_jobs_app(tmp_path, local_backend, job_ctx)
    with app.client:
        yield app
