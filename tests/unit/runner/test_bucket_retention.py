"""A bucket route's ``retention_s`` and ``callback_url``: what expires goes (sources only once recorded), and each
object's record is posted, signed, when it ends."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime, timedelta

import pytest

from deployments.common.errors import InvalidParameter
from serve_app.runner.callbacks import SIGNATURE_HEADER, verify
from serve_app.runner.jobs_config import CALLBACK_SECRET_ENV, JobsConfig
from serve_app.runner.records import record_names
from serve_app.runner.retention import sweep_route
from serve_app.runner.route_callbacks import PendingCallback, RouteCallbacks
from serve_app.runner.routing import build_routing_table
from serve_app.runner.worker import BucketWorker, job_executor
from storage.keys import CALLBACK_SUFFIX, HASHED_FOLDER
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
    assert {body["callback_url"] for body in bodies.values()} == {"http://127.0.0.1:9/bucket-hook"}  # signed too
    assert bodies["me.jpg"]["records"][0]["result_key"] == "me.png"
    assert bodies["text.jpg"]["records"][0]["error"]["code"] == "unsupported_image"
    assert pending_callbacks(LocalStore(tmp_path / "out")) == []  # delivered: nothing left to resume


def pending_callbacks(output: LocalStore) -> list[str]:
    return [info.key for info in output.list(f"{HASHED_FOLDER}/", suffix=CALLBACK_SUFFIX)]


def test_a_route_callback_cut_off_by_a_restart_is_sent_by_the_next_runner(tmp_path, local_backend, job_ctx, photo_jpeg):
    table = route_table(tmp_path, job_ctx, callback_url="http://127.0.0.1:9/bucket-hook")
    config = JobsConfig(callback_secret="route-secret", callback_hosts=("127.0.0.1",))
    output = LocalStore(tmp_path / "out")
    LocalStore(tmp_path / "in").put("me.jpg", photo_jpeg, content_type="image/jpeg")
    tried = []

    async def hanging_receiver(target, body, headers, timeout_s):
        tried.append(json.loads(body)["key"])
        await asyncio.Event().wait()  # the runner stops while the receiver still has not answered

    async def first_runner():
        callbacks = RouteCallbacks(table.routes, config, post=hanging_receiver)
        worker = BucketWorker(table, job_executor(local_backend, job_ctx), job_ctx, on_outcome=callbacks.observe)
        await worker.reconcile(table.routes[0])
        while not tried:
            await asyncio.sleep(0.01)
        # asyncio.run cancels the callback still waiting: the runner is gone

    asyncio.run(first_runner())
    assert tried == ["me.jpg"] and len(pending_callbacks(output)) == 1
    calls = resume_on_a_new_runner(table, config)
    assert [(call["key"], call["status"], call["records"][0]["result_key"]) for call in calls] == [
        ("me.jpg", "succeeded", "me.png")
    ]
    assert pending_callbacks(output) == []


def test_a_stored_callback_past_its_retry_time_is_given_up_and_a_stranger_is_left_alone(tmp_path, job_ctx):
    table = route_table(tmp_path, job_ctx, callback_url="http://127.0.0.1:9/bucket-hook")
    config = JobsConfig(callback_secret="route-secret", callback_hosts=("127.0.0.1",))
    output = LocalStore(tmp_path / "out")
    expired = PendingCallback(route="r", key="old.jpg", deadline_s=time.time() - 1)
    output.put(record_names("old.jpg").callback, expired.model_dump_json().encode(), content_type="application/json")
    stranger = f"{HASHED_FOLDER}/not-ours{CALLBACK_SUFFIX}"
    output.put(stranger, b"{}", content_type="application/json")
    assert resume_on_a_new_runner(table, config) == []
    assert pending_callbacks(output) == [stranger]


def resume_on_a_new_runner(table, config: JobsConfig) -> list[dict]:
    """What a runner that starts sends of the callbacks stored in the routes' outputs (the receiver answers 200)."""
    calls = []

    async def receiver(target, body, headers, timeout_s):
        calls.append(json.loads(body))
        return 200

    async def start():
        callbacks = RouteCallbacks(table.routes, config, post=receiver)
        callbacks.resume()
        await callbacks.drain()

    asyncio.run(start())
    return calls


def test_a_route_callback_needs_a_secret_from_the_environment_or_a_file(tmp_path, job_ctx, monkeypatch):
    table = route_table(tmp_path, job_ctx, callback_url="https://example.com/hook")
    monkeypatch.delenv(CALLBACK_SECRET_ENV, raising=False)
    with pytest.raises(InvalidParameter, match=r"set PORTRAIT_CALLBACK_SECRET \(or args.jobs.callback_secret_file\)"):
        RouteCallbacks(table.routes, JobsConfig())
    monkeypatch.setenv(CALLBACK_SECRET_ENV, "route-secret")
    RouteCallbacks(table.routes, JobsConfig())
