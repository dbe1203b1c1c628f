"""Bounded work: the webhook queue (bounded, deduplicated, a fixed set of consumers), scans in chunks, and a
reconfigured worker that takes over the old one's locks and queue."""

from __future__ import annotations

import asyncio

import pytest
from fastapi.testclient import TestClient

from serve_app.backfill import backfill
from serve_app.routes import create_api
from serve_app.runner.outcomes import Status
from serve_app.runner.pending import PendingFull
from serve_app.runner.triggers.events import ObjectEvent
from serve_app.settings import Settings
from storage.base import open_store
from storage.local import LocalStore
from tests.unit.runner.bucket_fixtures import make_worker
from tests.unit.runner.bucket_samples import s3_record


def run(coro):
    return asyncio.run(coro)


def created(key: str, etag: str | None = None) -> ObjectEvent:
    return ObjectEvent("in", key, "s3:ObjectCreated:Put", etag=etag)


def test_the_event_queue_is_bounded_deduplicated_and_spawns_no_task_per_object(tmp_path, local_backend, job_ctx):
    worker = make_worker(tmp_path, local_backend, job_ctx, max_pending=5, max_concurrency=2)

    async def burst():
        tasks_before = len(asyncio.all_tasks())
        accepted = worker.submit([created(f"p{i}.jpg", etag="e1") for i in range(4)] + [created("p0.jpg", "e1")])
        queued = worker.in_flight
        worker.submit([created("p1.jpg", "e1"), created("p1.jpg", "e2")])  # a replay, and a new version
        with pytest.raises(PendingFull) as refused:
            worker.submit([created("p8.jpg"), created("p9.jpg")])  # all or none: neither is queued
        tasks, after = len(asyncio.all_tasks()) - tasks_before, worker.in_flight
        worker.cancel()
        return accepted, queued, after, tasks, refused.value

    accepted, queued, after, tasks, refused = run(burst())
    assert (accepted, queued, after, tasks) == (5, 4, 5, 2)
    assert (refused.code, refused.http_status) == ("overloaded", 503)
    assert refused.details == {"pending": 5, "max_pending": 5, "refused": 2}


class WorkerSink:
    def __init__(self, worker) -> None:
        self.worker = worker

    async def submit(self, events):
        return self.worker.submit(events)


def test_a_full_queue_makes_the_webhook_answer_503_so_minio_replays_later(tmp_path, local_backend, job_ctx):
    worker = make_worker(tmp_path, local_backend, job_ctx, max_pending=3)
    app = create_api()
    app.state.backend = local_backend
    app.state.settings = Settings(events_token="t")
    app.state.event_sink = WorkerSink(worker)
    body = {"Records": [s3_record("in", f"p{i}.jpg", eTag=f"e{i}") for i in range(4)]}
    with TestClient(app) as client:
        answer = client.post("/v1/events/s3", json=body, headers={"Authorization": "Bearer t"})
        client.portal.call(worker.cancel)
    assert answer.status_code == 503
    assert answer.json()["error"]["code"] == "overloaded"


class CountingListing:
    """The input store, counting the objects its listing has handed out."""

    def __init__(self, store) -> None:
        self._store = store
        self.handed_out = 0

    def list(self, prefix: str = "", *, suffix: str | None = None):
        for info in self._store.list(prefix, suffix=suffix):
            self.handed_out += 1
            yield info

    def __getattr__(self, name):
        return getattr(self._store, name)


def test_a_scan_reads_its_listing_in_bounded_chunks(tmp_path, local_backend, job_ctx):
    source = LocalStore(tmp_path / "in")
    for index in range(10):
        source.put(f"p{index}.jpg", b"not a photo", content_type="image/jpeg")
    listings: list[CountingListing] = []

    def opener(location, settings=None):
        store = open_store(location, settings)
        if location.bucket.endswith("/in"):
            listings.append(CountingListing(store))
            return listings[-1]
        return store

    listed_at_each_job: list[int] = []
    worker = make_worker(tmp_path, local_backend, job_ctx, store_opener=opener, scan_chunk=3)
    real_run = worker._attempts.run

    async def noting(route, names, etag):
        listed_at_each_job.append(listings[0].handed_out)
        return await real_run(route, names, etag)

    worker._attempts.run = noting
    outcomes = run(worker.reconcile(worker.table.routes[0]))
    assert [o.status for o in outcomes] == [Status.FAILED] * 10
    assert listed_at_each_job == [3, 3, 3, 6, 6, 6, 9, 9, 9, 10]


def test_a_reconfigured_worker_takes_over_the_locks_and_queue_so_nothing_runs_twice(
    tmp_path, local_backend, job_ctx, photo_jpeg
):
    source = LocalStore(tmp_path / "in")
    for name in ("a.jpg", "b.jpg"):
        source.put(name, photo_jpeg, content_type="image/jpeg")
    real = make_worker(tmp_path, local_backend, job_ctx)._attempts._execute
    runs: list[str] = []

    async def scenario():
        release = asyncio.Event()

        async def held(task, data, params):
            runs.append("job")
            await release.wait()
            return await real(task, data, params)

        old = make_worker(tmp_path, local_backend, job_ctx, execute=held, max_concurrency=1)
        old.submit([created("a.jpg"), created("b.jpg")])  # a in flight, b waiting
        while not runs:
            await asyncio.sleep(0.01)
        new = make_worker(tmp_path, local_backend, job_ctx, execute=held, locks=old.locks)
        new.adopt(old.close())
        scan = asyncio.create_task(new.reconcile(new.table.routes[0]))
        await asyncio.sleep(0.1)
        release.set()
        outcomes = await scan
        await asyncio.gather(old.drain(), new.drain())
        return old, new, outcomes

    old, new, outcomes = run(scenario())
    assert len(runs) == 2  # one job per object, though two workers and a scan saw both
    assert (old.counts["done"], new.counts["done"]) == (1, 1)
    assert sorted((o.key, o.status) for o in outcomes) == [("a.jpg", Status.SKIPPED), ("b.jpg", Status.SKIPPED)]
    assert sorted(info.key for info in LocalStore(tmp_path / "out").list()) == ["a.jpg", "a.json", "b.jpg", "b.json"]


def test_the_backfill_never_runs_an_object_a_running_runner_is_processing(tmp_path, local_backend, job_ctx, photo_jpeg):
    LocalStore(tmp_path / "in").put("a.jpg", photo_jpeg, content_type="image/jpeg")
    real = make_worker(tmp_path, local_backend, job_ctx)._attempts._execute
    runs: list[str] = []

    async def scenario():
        release = asyncio.Event()

        async def held(task, data, params):
            runs.append(task)
            await release.wait()
            return await real(task, data, params)

        runner = make_worker(tmp_path, local_backend, job_ctx, execute=held)  # the service, another process
        in_flight = asyncio.create_task(runner.process_object(runner.table.routes[0], "a.jpg"))
        while not runs:
            await asyncio.sleep(0.01)

        def portrait_process():
            return backfill(str(tmp_path / "in"), "restore", execute=held, context=job_ctx, out=str(tmp_path / "out"))

        meanwhile = await portrait_process()
        release.set()
        return meanwhile, await in_flight, await portrait_process()

    meanwhile, done, after = run(scenario())
    assert (dict(meanwhile.counts), done.status, dict(after.counts), len(runs)) == (
        {"deferred": 1},
        Status.DONE,
        {"skipped": 1},
        1,
    )
    assert sorted(info.key for info in LocalStore(tmp_path / "out").list()) == ["a.jpg", "a.json"]
