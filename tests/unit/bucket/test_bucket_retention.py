"""A bucket route's ``retention_s`` and ``callback_url``: what expires goes (sources only once recorded), and each
object's record is posted, signed, when it ends."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime, timedelta

import pytest

from deployments.common.errors import InvalidParameter
from serve_app.bucket.callbacks import RouteCallbacks
from serve_app.bucket.retention import sweep_route
from serve_app.bucket.routing import build_routing_table
from serve_app.bucket.runner import BucketWorker, job_executor
from serve_app.jobs_api import JobsConfig
from serve_app.jobs_api.callbacks import SIGNATURE_HEADER, verify
from storage.local import LocalStore


def route_table(tmp_path, job_ctx, **extra):
    (tmp_path / "in").mkdir()
    spec = {"name": "r", "input": str(tmp_path / "in"), "output": str(tmp_path / "out"), "task": "cartoon", **extra}
    return build_routing_table([spec], job_ctx)


def test_retention_deletes_recorded_sources_and_old_outputs_and_keeps_the_rest(
    tmp_path, local_backend, job_ctx, photo_jpeg
):
    table = route_table(tmp_path, job_ctx, retention_s=60)
    source, output = LocalStore(tmp_path / "in"), LocalStore(tmp_path / "out")
    source.put("done.jpg", photo_jpeg, content_type="image/jpeg")
    worker = BucketWorker(table, job_executor(local_backend, job_ctx), job_ctx)
    asyncio.run(worker.process_object(table.routes[0], "done.jpg"))
    source.put("waiting.jpg", photo_jpeg, content_type="image/jpeg")  # not processed yet: no record
    assert sweep_route(table.routes[0], datetime.now(UTC)) == 0  # nothing is a minute old yet
    later = datetime.now(UTC) + timedelta(minutes=2)
    assert sweep_route(table.routes[0], later) == 3  # the source, its result and its record
    assert [info.key for info in source.list()] == ["waiting.jpg"]
    assert list(output.list()) == []


def test_a_route_without_retention_keeps_everything(tmp_path, job_ctx, photo_jpeg):
    table = route_table(tmp_path, job_ctx)
    LocalStore(tmp_path / "in").put("a.jpg", photo_jpeg, content_type="image/jpeg")
    assert sweep_route(table.routes[0], datetime.now(UTC) + timedelta(days=400)) == 0


def test_a_route_callback_posts_the_signed_record(tmp_path, local_backend, job_ctx, photo_jpeg):
    table = route_table(tmp_path, job_ctx, callback_url="http://127.0.0.1:9/bucket-hook")
    calls = []

    async def post(target, body, headers, timeout_s):
        calls.append((target, body, headers))
        return 200

    config = JobsConfig(callback_secret="route-secret", callback_hosts=("127.0.0.1",))
    callbacks = RouteCallbacks(table.routes, config, post=post)
    worker = BucketWorker(table, job_executor(local_backend, job_ctx), job_ctx, on_outcome=callbacks.observe)
    LocalStore(tmp_path / "in").put("me.jpg", photo_jpeg, content_type="image/jpeg")
    LocalStore(tmp_path / "in").put("text.jpg", b"not a photo", content_type="image/jpeg")

    async def scenario():
        await worker.reconcile(table.routes[0])
        await callbacks.drain()

    asyncio.run(scenario())
    bodies = {}
    for target, body, headers in calls:
        assert target.port == 9 and verify("route-secret", headers[SIGNATURE_HEADER], body, now_s=time.time())
        bodies[json.loads(body)["key"]] = json.loads(body)
    assert {key: (body["route"], body["status"]) for key, body in bodies.items()} == {
        "me.jpg": ("r", "succeeded"),
        "text.jpg": ("r", "failed"),
    }
    assert bodies["me.jpg"]["records"][0]["result_key"] == "me.png"
    assert bodies["text.jpg"]["records"][0]["error"]["code"] == "unsupported_image"


def test_a_route_callback_needs_a_secret(tmp_path, job_ctx):
    table = route_table(tmp_path, job_ctx, callback_url="https://example.com/hook")
    with pytest.raises(InvalidParameter, match="set args.jobs.callback_secret"):
        RouteCallbacks(table.routes, JobsConfig())
