"""The runner core on local folders with the real engines: one result or one error record per object version."""

from __future__ import annotations

import asyncio
import io
import json
from dataclasses import replace

import pytest
from PIL import Image

from deployments.common.errors import InternalError, ModelUnavailable
from serve_app.jobs.progress import read_waiting
from serve_app.runner.outcomes import Status
from serve_app.runner.triggers.events import ObjectEvent
from storage.local import LocalStore
from tests.stage_doubles import FaceAnalysisDouble
from tests.unit.runner.bucket_fixtures import make_worker


class FlakyBackend(FaceAnalysisDouble):
    """The real backend behind a face analyzer that is down for its first ``failures`` calls (a replica restart)."""

    def __init__(self, backend, failures: int) -> None:
        super().__init__(backend)
        self.failures_left = failures
        self.calls = 0

    async def analyze_faces(self, image):
        self.calls += 1
        if self.failures_left > 0:
            self.failures_left -= 1
            raise ModelUnavailable("FaceAnalyzer is restarting")
        return await super().analyze_faces(image)


class BuggyBackend(FaceAnalysisDouble):
    """The real backend behind a face analyzer with a bug: ``error`` on every call."""

    def __init__(self, backend, error: Exception) -> None:
        super().__init__(backend)
        self._error = error
        self.calls = 0

    async def analyze_faces(self, image):
        self.calls += 1
        raise self._error


class ConcurrencyProbe(FaceAnalysisDouble):
    """The real backend, recording how many face analyses ran at once."""

    def __init__(self, backend) -> None:
        super().__init__(backend)
        self.running = 0
        self.peak = 0

    async def analyze_faces(self, image):
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            await asyncio.sleep(0.01)
            return await super().analyze_faces(image)
        finally:
            self.running -= 1


@pytest.fixture
def folders(tmp_path):
    return LocalStore(tmp_path / "in"), LocalStore(tmp_path / "out"), tmp_path


def run(coro):
    return asyncio.run(coro)


def test_a_photo_gets_its_result_and_metadata(folders, local_backend, job_ctx, photo_jpeg):
    source, out, tmp = folders
    info = source.put("trip/Me 1.jpg", photo_jpeg, content_type="image/jpeg")
    worker = make_worker(tmp, local_backend, job_ctx)
    route = worker.table.routes[0]
    outcome = run(worker.process_object(route, "trip/Me 1.jpg"))
    assert (outcome.status, outcome.etag, outcome.attempts) == (Status.DONE, info.etag, 1)
    assert out.head("trip/Me 1.jpg").content_type == "image/jpeg"
    record = json.loads(out.get("trip/Me 1.json", max_bytes=1 << 20).data)
    assert record["source"] == {
        "bucket": str(tmp / "in"),
        "key": "trip/Me 1.jpg",
        "etag": info.etag,
        "version_id": None,
        "size_bytes": len(photo_jpeg),
        "last_modified": record["source"]["last_modified"],
    }
    assert (record["route"], record["task"], record["result_key"]) == ("r", "restore", "trip/Me 1.jpg")
    assert record["params"]["model"] is None  # as asked: the service's default
    assert record["meta"]["params"]["model"] == "gfpgan-v1.4"  # the first in the order (none has weights here)
    assert record["meta"]["engine"] in ("gpen", "classic-restore") and record["meta"]["faces"] == 1
    assert {"decode", "analyze", "restore", "encode"} <= set(record["meta"]["timings_ms"])
    assert record["event_lag_s"] >= 0 and record["attempts"] == 1


def test_an_id_photo_with_a_layout_writes_its_print_sheet(folders, local_backend, job_ctx, photo_jpeg):
    source, out, tmp = folders
    source.put("me.jpg", photo_jpeg, content_type="image/jpeg")
    worker = make_worker(tmp, local_backend, job_ctx, task="idphoto", params={"layout": "6inch"})
    assert run(worker.process_object(worker.table.routes[0], "me.jpg")).status is Status.DONE
    record = json.loads(out.get("me.json", max_bytes=1 << 20).data)
    assert (record["result_key"], record["sheet_key"]) == ("me.jpg", "me.sheet.jpg")
    assert sorted(info.key for info in out.list()) == ["me.jpg", "me.json", "me.sheet.jpg"]
    assert out.head("me.sheet.jpg").size_bytes > out.head("me.jpg").size_bytes


def test_an_id_photo_with_hd_writes_its_hd_copy_beside_the_result(folders, local_backend, job_ctx, photo_jpeg):
    source, out, tmp = folders
    source.put("me.jpg", photo_jpeg, content_type="image/jpeg")
    worker = make_worker(tmp, local_backend, job_ctx, task="idphoto", params={"hd": True, "return": "json"})
    assert run(worker.process_object(worker.table.routes[0], "me.jpg")).status is Status.DONE
    record = json.loads(out.get("me.json", max_bytes=1 << 20).data)
    assert (record["result_key"], record["sheet_key"], record["hd_key"]) == ("me.jpg", None, "me.hd.jpg")
    hd = Image.open(io.BytesIO(out.get("me.hd.jpg", max_bytes=1 << 24).data))
    assert min(hd.size) >= 600 and abs(hd.size[0] / hd.size[1] - 295 / 413) < 0.003
    attachments = json.loads(out.get(record["attachments_key"], max_bytes=1 << 20).data)
    assert attachments["hd"] == {
        "width": hd.size[0],
        "height": hd.size[1],
        "dpi": pytest.approx(hd.info["dpi"][0], abs=0.5),
        "bytes": out.head("me.hd.jpg").size_bytes,
    }


def test_duplicates_and_replays_give_one_result(folders, local_backend, job_ctx, photo_jpeg):
    source, out, tmp = folders
    source.put("a.jpg", photo_jpeg, content_type="image/jpeg")
    worker = make_worker(tmp, local_backend, job_ctx)
    route = worker.table.routes[0]

    async def three_at_once():
        return await asyncio.gather(*(worker.process_object(route, "a.jpg") for _ in range(3)))

    statuses = sorted(outcome.status for outcome in run(three_at_once()))
    assert statuses == [Status.DONE, Status.SKIPPED, Status.SKIPPED]
    assert run(make_worker(tmp, local_backend, job_ctx).process_object(route, "a.jpg")).status is Status.SKIPPED
    assert sorted(info.key for info in out.list()) == ["a.jpg", "a.json"]


def test_a_new_version_of_an_object_is_processed_again(folders, local_backend, job_ctx, photo_jpeg):
    source, out, tmp = folders
    source.put("a.jpg", photo_jpeg, content_type="image/jpeg")
    worker = make_worker(tmp, local_backend, job_ctx)
    route = worker.table.routes[0]
    assert run(worker.process_object(route, "a.jpg")).status is Status.DONE
    second = source.put("a.jpg", photo_jpeg + b"\0", content_type="image/jpeg")  # same photo, new bytes
    assert run(worker.process_object(route, "a.jpg")).status is Status.DONE
    assert json.loads(out.get("a.json", max_bytes=1 << 20).data)["source"]["etag"] == second.etag


@pytest.mark.parametrize(
    ("key", "payload", "task", "metadata", "code"),
    [
        ("notes.txt", b"hello, not a photo", "restore", None, "unsupported_image"),
        ("broken.jpg", "truncated", "restore", None, "corrupt_image"),
        ("wall.png", "faceless", "idphoto", None, "no_face"),
        ("bad-params.jpg", "photo", "restore", {"portrait-params": '{"upscale": 3}'}, "invalid_parameter"),
        ("not-json.jpg", "photo", "restore", {"portrait-params": "{oops"}, "invalid_parameter"),
    ],
)
def test_caller_faults_write_an_error_record_once(
    folders, local_backend, job_ctx, photo_jpeg, faceless_png, key, payload, task, metadata, code
):
    source, out, tmp = folders
    data = {"truncated": photo_jpeg[: len(photo_jpeg) // 3], "faceless": faceless_png, "photo": photo_jpeg}.get(
        payload, payload
    )
    info = source.put(key, data, content_type="application/octet-stream", metadata=metadata)
    worker = make_worker(tmp, local_backend, job_ctx, task=task)
    route = worker.table.routes[0]
    outcome = run(worker.process_object(route, key))
    assert (outcome.status, outcome.code, outcome.attempts) == (Status.FAILED, code, 1)
    record = json.loads(out.get(f"_errors/{key}.json", max_bytes=1 << 20).data)
    assert (record["kind"], record["error"]["code"], record["source"]["etag"]) == ("error", code, info.etag)
    assert record["error"]["message"]
    assert [i.key for i in out.list()] == [f"_errors/{key}" + ".json"]
    assert run(worker.process_object(route, key)).status is Status.SKIPPED


def test_objects_over_the_byte_limit_are_refused_before_reading(folders, local_backend, job_ctx, photo_jpeg):
    source, out, tmp = folders
    source.put("big.jpg", photo_jpeg, content_type="image/jpeg")
    small = replace(job_ctx, limits=replace(job_ctx.limits, max_bytes=1000))
    worker = make_worker(tmp, local_backend, small)
    outcome = run(worker.process_object(worker.table.routes[0], "big.jpg"))
    assert (outcome.status, outcome.code) == (Status.FAILED, "image_too_large")


def test_transient_failures_are_retried_with_backoff(folders, local_backend, job_ctx, photo_jpeg):
    source, out, tmp = folders
    source.put("a.jpg", photo_jpeg, content_type="image/jpeg")
    flaky = FlakyBackend(local_backend, failures=2)
    worker = make_worker(tmp, flaky, job_ctx)
    outcome = run(worker.process_object(worker.table.routes[0], "a.jpg"))
    assert (outcome.status, outcome.attempts, flaky.calls) == (Status.DONE, 3, 3)
    assert json.loads(out.get("a.json", max_bytes=1 << 20).data)["attempts"] == 3


def test_lasting_failures_write_no_record_only_why_the_object_waits_and_the_reconciler_finishes_the_job(
    folders, local_backend, job_ctx, photo_jpeg
):
    source, out, tmp = folders
    source.put("a.jpg", photo_jpeg, content_type="image/jpeg")
    down = make_worker(tmp, FlakyBackend(local_backend, failures=100), job_ctx)
    outcome = run(down.process_object(down.table.routes[0], "a.jpg"))
    assert (outcome.status, outcome.code, outcome.attempts) == (Status.DEFERRED, "model_unavailable", 3)
    assert [info.key for info in out.list()] == ["_work/a.jpg/waiting.json"]
    assert read_waiting(out, "a.jpg") == {"code": "model_unavailable", "message": "FaceAnalyzer is restarting"}
    healthy = make_worker(tmp, local_backend, job_ctx)
    assert [o.status for o in run(healthy.reconcile(healthy.table.routes[0]))] == [Status.DONE]
    assert read_waiting(out, "a.jpg") is None


@pytest.mark.parametrize(
    "bug", [InternalError("face count does not match the landmarks"), KeyError("landmarks")], ids=["typed", "untyped"]
)
def test_a_bug_in_a_job_is_retried_then_recorded_as_internal_not_as_the_callers_fault(
    folders, local_backend, job_ctx, photo_jpeg, bug
):
    source, out, tmp = folders
    info = source.put("a.jpg", photo_jpeg, content_type="image/jpeg")
    buggy = BuggyBackend(local_backend, bug)
    worker = make_worker(tmp, buggy, job_ctx)
    outcome = run(worker.process_object(worker.table.routes[0], "a.jpg"))
    assert (outcome.status, outcome.code, outcome.attempts, buggy.calls) == (Status.FAILED, "internal_error", 3, 3)
    assert [item.key for item in out.list()] == ["_errors/a.jpg.json"]
    record = json.loads(out.get("_errors/a.jpg.json", max_bytes=1 << 20).data)
    assert record["error"]["code"] == "internal_error" and record["source"]["etag"] == info.etag
    assert ("KeyError" in record["error"]["message"]) == isinstance(bug, KeyError)


def test_submit_returns_at_once_and_work_finishes_in_the_background(folders, local_backend, job_ctx, photo_jpeg):
    source, out, tmp = folders
    for name in ("a.jpg", "b.jpg"):
        source.put(name, photo_jpeg, content_type="image/jpeg")
    worker = make_worker(tmp, local_backend, job_ctx)
    events = [
        ObjectEvent("in", "a.jpg", "s3:ObjectCreated:Put"),
        ObjectEvent("in", "a.jpg", "s3:ObjectCreated:Put"),  # a replay
        ObjectEvent("in", "b.jpg", "s3:ObjectCreated:CompleteMultipartUpload"),
        ObjectEvent("in", "b.jpg", "s3:ObjectRemoved:Delete"),
        ObjectEvent("elsewhere", "c.jpg", "s3:ObjectCreated:Put"),
    ]

    async def scenario():
        accepted = worker.submit(events)
        in_flight = worker.in_flight
        await worker.drain()
        return accepted, in_flight

    assert run(scenario()) == (3, 2)  # the replay of a.jpg is already queued: one entry, one attempt
    assert worker.counts["done"] == 2 and worker.counts["skipped"] == 0
    assert sorted(i.key for i in out.list()) == ["a.jpg", "a.json", "b.jpg", "b.json"]


def test_concurrency_is_bounded(folders, local_backend, job_ctx, photo_jpeg):
    source, out, tmp = folders
    for index in range(6):
        source.put(f"p{index}.jpg", photo_jpeg, content_type="image/jpeg")
    probe = ConcurrencyProbe(local_backend)
    worker = make_worker(tmp, probe, job_ctx, max_concurrency=2)
    outcomes = run(worker.reconcile(worker.table.routes[0]))
    assert [o.status for o in outcomes] == [Status.DONE] * 6
    assert probe.peak == 2


def test_two_sources_with_one_stem_do_not_overwrite_each_other(folders, local_backend, job_ctx, photo_jpeg):
    source, out, tmp = folders
    source.put("a.jpg", photo_jpeg, content_type="image/jpeg")
    source.put("a.png", photo_jpeg, content_type="image/jpeg")
    worker = make_worker(tmp, local_backend, job_ctx)
    outcomes = run(worker.reconcile(worker.table.routes[0]))
    assert sorted((o.key, o.status, o.code) for o in outcomes) == [
        ("a.jpg", Status.DONE, None),
        ("a.png", Status.FAILED, "result_collision"),
    ]
    again = make_worker(tmp, local_backend, job_ctx)
    assert {o.status for o in run(again.reconcile(again.table.routes[0]))} == {Status.SKIPPED}


def test_a_restart_mid_batch_still_gives_exactly_one_result_each(folders, local_backend, job_ctx, photo_jpeg):
    source, out, tmp = folders
    keys = [f"batch/{index:02d}.jpg" for index in range(10)]
    for key in keys:
        source.put(key, photo_jpeg, content_type="image/jpeg")
    first = make_worker(tmp, local_backend, job_ctx, max_concurrency=2)

    async def crash_midway():
        first.submit([ObjectEvent("in", key, "s3:ObjectCreated:Put") for key in keys])
        while first.counts["done"] < 3:
            await asyncio.sleep(0.01)
        first.cancel()
        await first.drain()

    run(crash_midway())
    assert 3 <= first.counts["done"] < len(keys)
    fresh = make_worker(tmp, local_backend, job_ctx)
    outcomes = run(fresh.reconcile(fresh.table.routes[0]))
    assert sorted(o.key for o in outcomes) == keys
    done_first = {key for key in keys if out.exists(key.replace(".jpg", ".json"))}
    assert len(done_first) == len(keys)
    results = sorted(i.key for i in out.list())
    assert results == sorted([k for k in keys] + [k.replace(".jpg", ".json") for k in keys])
    assert all(o.status in (Status.DONE, Status.SKIPPED) for o in outcomes)


def test_deleting_an_error_record_asks_the_poller_for_a_retry(folders, local_backend, job_ctx, photo_jpeg):
    source, out, tmp = folders
    source.put("late.jpg", b"half an upload", content_type="image/jpeg")
    worker = make_worker(tmp, local_backend, job_ctx)
    route = worker.table.routes[0]
    assert [o.status for o in run(worker.reconcile(route))] == [Status.FAILED]
    assert run(worker.reconcile(route)) == []  # recorded: the next scan reads nothing
    out.delete("_errors/late.jpg.json")
    assert [o.status for o in run(worker.reconcile(route))] == [Status.FAILED]
    source.put("late.jpg", photo_jpeg, content_type="image/jpeg")  # the full upload: a new ETag
    assert [o.status for o in run(worker.reconcile(route))] == [Status.DONE]
    assert not out.exists("_errors/late.jpg.json")  # the stale error record goes with the result
