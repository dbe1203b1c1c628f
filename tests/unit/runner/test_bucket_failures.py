"""Every step of an attempt is classified: store blips are retried, refusals and timeouts end in a record, a scan
never dies on one object, and a timed-out job really stops."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

from deployments.common.errors import ModelUnavailable, RequestTimeout
from serve_app.jobs.deadline import run_in_worker, within_deadline
from serve_app.runner.outcomes import RetryPolicy, Status
from serve_app.runner.triggers.events import ObjectEvent
from serve_app.runner.triggers.sqs import SqsConfig, SqsConsumer
from storage.base import open_store
from storage.errors import AccessDenied, KeyTooLong, ObjectArchived, StoreUnavailable
from storage.local import LocalStore
from tests.unit.runner.bucket_fixtures import make_worker
from tests.unit.runner.bucket_samples import s3_record


class FaultyStore:
    """A real store whose ``method`` raises ``error`` on its first ``times`` calls (``None``: every call), on key
    ``only_key`` alone when given."""

    def __init__(self, store, method: str, error: Exception, times: int | None, only_key: str | None = None) -> None:
        self._store = store
        self._method = method
        self._error = error
        self._left = times
        self._only_key = only_key
        self.failures = 0

    def __getattr__(self, name):
        real = getattr(self._store, name)
        if name != self._method:
            return real

        def failing(*args, **kwargs):
            if self._only_key not in (None, args[0]):
                return real(*args, **kwargs)
            if self._left is None or self._left > 0:
                self._left = None if self._left is None else self._left - 1
                self.failures += 1
                raise self._error
            return real(*args, **kwargs)

        return failing


def faulty_opener(side: str, method: str, error: Exception, times: int | None, only_key: str | None = None):
    """A ``store_opener`` that puts a ``FaultyStore`` on the route's ``in`` or ``out`` folder."""
    made: list[FaultyStore] = []

    def opener(location, settings=None):
        store = open_store(location, settings)
        if location.bucket.endswith(f"/{side}"):
            made.append(FaultyStore(store, method, error, times, only_key))
            return made[-1]
        return store

    opener.made = made
    return opener


def run(coro):
    return asyncio.run(coro)


def records_of(out: LocalStore) -> dict[str, dict]:
    return {info.key: json.loads(out.get(info.key, max_bytes=1 << 20).data) for info in out.list(suffix=".json")}


@pytest.mark.parametrize(
    ("side", "method", "only_key"),
    [
        ("out", "put", "a.jpg"),
        ("out", "put", "a.json"),
        ("out", "get", "a.json"),
        ("out", "put", None),
        ("in", "head", None),
        ("in", "get_to", None),
    ],
    ids=["writing-the-result", "writing-the-record", "reading-records", "claiming", "head", "reading-the-object"],
)
def test_a_store_blip_at_any_step_is_retried_and_the_object_is_not_lost(
    tmp_path, local_backend, job_ctx, photo_jpeg, side, method, only_key
):
    LocalStore(tmp_path / "in").put("a.jpg", photo_jpeg, content_type="image/jpeg")
    opener = faulty_opener(side, method, StoreUnavailable("connection reset"), times=1, only_key=only_key)
    worker = make_worker(tmp_path, local_backend, job_ctx, store_opener=opener)
    outcome = run(worker.process_object(worker.table.routes[0], "a.jpg"))
    assert (outcome.status, outcome.attempts, opener.made[0].failures) == (Status.DONE, 2, 1)
    assert sorted(records_of(LocalStore(tmp_path / "out"))) == ["a.json"]


def test_a_webhook_object_survives_an_output_blip(tmp_path, local_backend, job_ctx, photo_jpeg):
    LocalStore(tmp_path / "in").put("a.jpg", photo_jpeg, content_type="image/jpeg")
    opener = faulty_opener("out", "put", StoreUnavailable("503 Slow Down"), times=2, only_key="a.json")
    worker = make_worker(tmp_path, local_backend, job_ctx, store_opener=opener)

    async def deliver():
        worker.submit([ObjectEvent("in", "a.jpg", "s3:ObjectCreated:Put")])
        await worker.drain()

    run(deliver())
    assert (worker.counts["done"], worker.counts["deferred"]) == (1, 0)
    assert records_of(LocalStore(tmp_path / "out"))["a.json"]["attempts"] == 3


@pytest.mark.parametrize(
    ("side", "method", "error", "code"),
    [
        ("in", "head", AccessDenied("denied", status=403), "access_denied"),
        ("in", "get_to", ObjectArchived("in Glacier", status=403), "object_archived"),
        ("out", "put", KeyTooLong("key too long", status=400), "key_too_long"),
    ],
)
def test_a_store_refusal_ends_in_an_error_record_after_n_tries_not_a_retry_forever(
    tmp_path, local_backend, job_ctx, photo_jpeg, side, method, error, code
):
    info = LocalStore(tmp_path / "in").put("a.jpg", photo_jpeg, content_type="image/jpeg")
    # On the output, the result's write is refused; the error record's is not (another name, under _errors/).
    opener = faulty_opener(side, method, error, times=None, only_key="a.jpg")
    worker = make_worker(tmp_path, local_backend, job_ctx, store_opener=opener)
    route = worker.table.routes[0]
    outcomes = run(worker.reconcile(route))
    assert [(o.status, o.code, o.attempts, o.etag) for o in outcomes] == [(Status.FAILED, code, 3, info.etag)]
    record = records_of(LocalStore(tmp_path / "out"))["_errors/a.jpg.json"]
    assert (record["error"]["code"], record["source"]["etag"], record["source"]["key"]) == (code, info.etag, "a.jpg")
    assert run(worker.reconcile(route)) == []  # recorded: not redone on the next scan


def test_a_throttled_store_is_retried_then_left_for_the_next_scan_with_no_record_only_why(
    tmp_path, local_backend, job_ctx, photo_jpeg
):
    LocalStore(tmp_path / "in").put("a.jpg", photo_jpeg, content_type="image/jpeg")
    throttled = faulty_opener("in", "get_to", StoreUnavailable("SlowDown", status=503), times=None)
    worker = make_worker(tmp_path, local_backend, job_ctx, store_opener=throttled)
    outcomes = run(worker.reconcile(worker.table.routes[0]))
    assert [(o.status, o.code, o.attempts) for o in outcomes] == [(Status.DEFERRED, "store_unavailable", 3)]
    assert [info.key for info in LocalStore(tmp_path / "out").list()] == ["_work/a.jpg/waiting.json"]


class FakeSqs:
    def __init__(self, bodies: list[dict]) -> None:
        self.messages = [
            {"MessageId": str(i), "ReceiptHandle": f"r{i}", "Body": json.dumps(body)} for i, body in enumerate(bodies)
        ]
        self.deleted: list[str] = []

    def receive_message(self, **_):
        messages, self.messages = self.messages, []
        return {"Messages": messages}

    def delete_message(self, QueueUrl, ReceiptHandle):  # noqa: N803 (boto3's argument names)
        self.deleted.append(ReceiptHandle)


def test_an_sqs_message_of_a_permanent_failure_is_deleted_not_returned_forever(
    tmp_path, local_backend, job_ctx, photo_jpeg
):
    LocalStore(tmp_path / "in").put("a.jpg", photo_jpeg, content_type="image/jpeg")
    denied = faulty_opener("in", "head", AccessDenied("denied", status=403), times=None)
    worker = make_worker(tmp_path, local_backend, job_ctx, store_opener=denied)
    sqs = FakeSqs([{"Records": [s3_record("in", "a.jpg")]}])
    consumer = SqsConsumer(worker, SqsConfig(queue_url="http://sqs/q", region="us-east-1"), client=sqs)
    assert run(consumer.receive_once()) == 1
    assert (sqs.deleted, consumer.kept, worker.counts["failed"]) == (["r0"], 0, 1)
    assert records_of(LocalStore(tmp_path / "out"))["_errors/a.jpg.json"]["source"]["etag"] == "abc123"


def test_a_scan_goes_on_when_one_object_raises(tmp_path, local_backend, job_ctx, photo_jpeg):
    source = LocalStore(tmp_path / "in")
    for name in ("a.jpg", "b.jpg", "c.jpg"):
        source.put(name, photo_jpeg, content_type="image/jpeg")
    worker = make_worker(tmp_path, local_backend, job_ctx)
    real_run = worker._attempts.run

    async def surprise_on_b(route, names, etag):
        if names.key == "b.jpg":
            raise RuntimeError("a bug outside the attempts")
        return await real_run(route, names, etag)

    worker._attempts.run = surprise_on_b
    outcomes = run(worker.reconcile(worker.table.routes[0]))
    assert sorted((o.key, o.status) for o in outcomes) == [
        ("a.jpg", Status.DONE),
        ("b.jpg", Status.DEFERRED),
        ("c.jpg", Status.DONE),
    ]
    state = worker.route_states()["r"]
    assert not state.scan_failing and "RuntimeError" in state.last_error
    assert (worker.counts["done"], worker.counts["deferred"]) == (2, 1)


class SlowJob:
    """A job of two CPU stages in worker threads; the first takes ``stage_s``. Counts runs and running threads."""

    def __init__(self, stage_s: float) -> None:
        self.stage_s = stage_s
        self.runs = 0
        self.second_stages = 0
        self.running = 0
        self._lock = threading.Lock()

    def _stage(self, seconds: float) -> None:
        with self._lock:
            self.running += 1
        time.sleep(seconds)
        with self._lock:
            self.running -= 1

    async def __call__(self, task, data, params):
        self.runs += 1
        await run_in_worker(self._stage, self.stage_s)
        self.second_stages += 1
        await run_in_worker(self._stage, 0.0)
        raise AssertionError("the job should have timed out")


def test_a_job_slower_than_the_timeout_ends_in_a_timeout_record_and_its_threads_stop(
    tmp_path, local_backend, job_ctx, photo_jpeg
):
    info = LocalStore(tmp_path / "in").put("slow.jpg", photo_jpeg, content_type="image/jpeg")
    job = SlowJob(stage_s=0.3)
    retry = RetryPolicy(max_attempts=2, initial_backoff_s=0, max_backoff_s=0)
    worker = make_worker(tmp_path, local_backend, job_ctx, execute=job, job_timeout_s=0.05, retry=retry)
    route = worker.table.routes[0]
    first = run(worker.reconcile(route))
    assert job.running == 0  # the slot was held until the timed-out stage had ended
    later_scans = [run(worker.reconcile(route)) for _ in range(2)]
    assert [(o.status, o.code, o.attempts) for o in first] == [(Status.FAILED, "timeout", 2)]
    assert (later_scans, job.runs, job.second_stages) == ([[], []], 2, 0)
    record = records_of(LocalStore(tmp_path / "out"))["_errors/slow.jpg.json"]
    assert (record["error"]["code"], record["source"]["etag"]) == ("timeout", info.etag)


def test_timeouts_are_counted_per_version_across_scans(tmp_path, local_backend, job_ctx, photo_jpeg):
    LocalStore(tmp_path / "in").put("slow.jpg", photo_jpeg, content_type="image/jpeg")
    job = SlowJob(stage_s=0.2)
    retry = RetryPolicy(max_attempts=3, initial_backoff_s=0, max_backoff_s=0)
    worker = make_worker(tmp_path, local_backend, job_ctx, execute=job, job_timeout_s=0.05, retry=retry)
    route = worker.table.routes[0]
    real_run = job.__call__

    flaky_calls = iter([False, True, False])  # the second attempt meets a restarting model instead of the timeout

    async def mostly_slow(task, data, params):
        if next(flaky_calls, False):
            raise ModelUnavailable("restarting")
        return await real_run(task, data, params)

    worker._attempts._execute = mostly_slow
    assert [(o.status, o.code) for o in run(worker.reconcile(route))] == [(Status.DEFERRED, "timeout")]
    assert [(o.status, o.code) for o in run(worker.reconcile(route))] == [(Status.FAILED, "timeout")]
    assert job.runs == 3  # 2 timeouts in the first scan, the third (and last) in the next


def test_a_timed_out_request_starts_no_further_stage_and_can_wait_for_its_thread():
    job = SlowJob(stage_s=0.2)

    async def request():
        with pytest.raises(RequestTimeout) as timed_out:
            await within_deadline(job("restore", b"", None), 0.05, wait_stopped=True)
        running_at_error = job.running
        await asyncio.sleep(0.3)
        return timed_out.value, running_at_error

    error, running_at_error = run(request())
    assert (error.code, error.http_status, error.details) == ("timeout", 504, {"timeout_s": 0.05})
    assert (running_at_error, job.second_stages, job.runs) == (0, 0, 1)
