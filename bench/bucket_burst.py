"""A burst of large webhook deliveries: how many events the bucket runner holds, and what they cost in memory.

    .venv/bin/python -m bench.bucket_burst --posts 10 --body-mib 1 --max-pending 10000

Each POST to ``/v1/events/s3`` carries one MinIO-shaped body of ``--body-mib`` MiB packed with minimal object-created
records (distinct keys, about 9,300 per MiB). The runner's consumers are stalled (every HEAD waits), as when its
models are busy, so nothing drains during the burst: the figures are the worst case. Printed per POST: the answer
(200, or 503 once the queue is full: MinIO keeps the events in its ``queue_dir`` and replays them later), the events
queued, the asyncio tasks alive, and the Python heap growth (``tracemalloc``) since before the burst.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import threading
import tracemalloc
from pathlib import Path

from fastapi.testclient import TestClient

from serve_app.jobs import job_context
from serve_app.routes import create_api
from serve_app.runner.routing import build_routing_table
from serve_app.runner.worker import BucketWorker
from serve_app.settings import Settings
from storage.base import open_store

TOKEN = "burst"
HEADERS = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}


class StalledStore:
    """A store whose ``head`` waits until ``released``: consumers stay busy for the whole burst."""

    def __init__(self, store, released: threading.Event) -> None:
        self._store = store
        self._released = released

    def head(self, key: str):
        self._released.wait()
        return self._store.head(key)

    def __getattr__(self, name):
        return getattr(self._store, name)


class WorkerSink:
    """What the ingress's ``BucketRunnerClient`` does through a handle, in-process."""

    def __init__(self, worker: BucketWorker) -> None:
        self.worker = worker

    async def submit(self, events):
        return self.worker.submit(events)


def burst_body(first: int, body_bytes: int) -> tuple[bytes, int]:
    """A MinIO webhook body of about ``body_bytes`` with records for keys ``p<first>.jpg``, ``p<first+1>.jpg``..."""
    records, size, index = [], 0, first
    while size < body_bytes - 200:
        s3 = {"bucket": {"name": "in"}, "object": {"key": f"p{index}.jpg"}}
        record = {"eventName": "s3:ObjectCreated:Put", "s3": s3}
        size += len(json.dumps(record)) + 2
        records.append(record)
        index += 1
    return json.dumps({"EventName": "s3:ObjectCreated:Put", "Records": records}).encode(), len(records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--posts", type=int, default=10)
    parser.add_argument("--body-mib", type=float, default=1.0)
    parser.add_argument("--max-pending", type=int, default=10_000)
    parser.add_argument("--max-concurrency", type=int, default=4)
    args = parser.parse_args()

    settings = Settings(events_token=TOKEN)
    context = job_context(settings)
    released = threading.Event()
    with tempfile.TemporaryDirectory() as tmp:
        folders = Path(tmp)
        (folders / "in").mkdir()

        def opener(location, store_settings=None):
            store = open_store(location, store_settings)
            return StalledStore(store, released) if location.bucket.endswith("/in") else store

        table = build_routing_table(
            [{"name": "drop", "input": str(folders / "in"), "output": str(folders / "out"), "task": "restore"}],
            context,
        )
        worker = BucketWorker(
            table,
            _no_job,  # never reached: every HEAD stalls
            context,
            max_concurrency=args.max_concurrency,
            max_pending=args.max_pending,
            store_opener=opener,
        )
        app = create_api()
        app.state.settings = settings
        app.state.event_sink = WorkerSink(worker)
        bodies, first = [], 0
        for _ in range(args.posts):
            body, count = burst_body(first, int(args.body_mib * (1 << 20)))
            bodies.append((body, count))
            first += count
        print(f"{args.posts} POSTs of {len(bodies[0][0]):,} bytes, {bodies[0][1]:,} records each")
        print("| POST | answer | events queued | asyncio tasks | heap growth MiB |")
        print("|---|---|---|---|---|")
        with TestClient(app) as client:
            tracemalloc.start()
            baseline = tracemalloc.get_traced_memory()[0]
            for number, (body, _) in enumerate(bodies, 1):
                answer = client.post("/v1/events/s3", content=body, headers=HEADERS)
                queued = client.portal.call(lambda: _queued(worker))
                tasks = client.portal.call(_task_count)
                grown_mib = (tracemalloc.get_traced_memory()[0] - baseline) / (1 << 20)
                print(f"| {number} | {answer.status_code} | {queued:,} | {tasks} | {grown_mib:.1f} |")
            peak_mib = (tracemalloc.get_traced_memory()[1] - baseline) / (1 << 20)
            tracemalloc.stop()
            released.set()
            client.portal.call(_cancel, worker)
        print(f"heap peak during the burst: {peak_mib:.1f} MiB above the start")


async def _no_job(task, data, params):
    raise RuntimeError("the burst bench runs no job")


async def _queued(worker: BucketWorker) -> int:
    return worker.in_flight


async def _task_count() -> int:
    return len(asyncio.all_tasks())


async def _cancel(worker: BucketWorker) -> None:
    worker.cancel()


if __name__ == "__main__":
    main()
