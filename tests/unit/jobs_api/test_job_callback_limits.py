"""Many jobs ending at once (issue #32, finding 1): the runner sends at most ``callback_concurrency`` callbacks at a
time and holds at most ``callback_held_max`` endings in memory; the rest wait in the jobs store, and every callback
arrives in the end, once per job."""

from __future__ import annotations

import asyncio
import json

from tests.unit.jobs_api.conftest import make_jobs_app

NOT_AN_IMAGE = {"image": ("x.jpg", b"not an image", "image/jpeg")}  # accepted, then fails at once: a quick ending
DEFAULT_CONCURRENCY = 16  # args.jobs.callback_concurrency's default


def submit(app, count: int) -> list[str]:
    form = {"task": "cartoon", "callback_url": "http://127.0.0.1:9/hook"}
    return [app.client.post("/v1/jobs", files=NOT_AN_IMAGE, data=form).json()["id"] for _ in range(count)]


def wait_until(app, condition, what: str, timeout_s: float = 30.0) -> None:
    for _ in range(int(timeout_s / 0.05)):
        if condition():
            return
        app.client.portal.call(asyncio.sleep, 0.05)
    raise AssertionError(f"timed out waiting until {what}")


def delivered_ids(app) -> list[str]:
    return sorted(json.loads(body)["id"] for _, body, _ in app.receiver.calls)


def test_many_jobs_ending_at_once_send_at_most_callback_concurrency_callbacks_and_all_arrive(
    tmp_path, local_backend, job_ctx
):
    app = make_jobs_app(tmp_path, local_backend, job_ctx, max_queued=64)
    with app.client:
        app.receiver.gate = app.client.portal.call(asyncio.Event)  # every receiver answers late
        job_ids = submit(app, DEFAULT_CONCURRENCY + 8)
        statuses = lambda: [app.client.get(f"/v1/jobs/{job_id}").json()["status"] for job_id in job_ids]  # noqa: E731
        wait_until(app, lambda: set(statuses()) == {"failed"}, "every job has ended")
        wait_until(app, lambda: app.receiver.in_flight >= DEFAULT_CONCURRENCY, "the receivers are busy")
        app.client.portal.call(asyncio.sleep, 0.5)  # time for more to start, were they allowed
        assert app.receiver.peak == DEFAULT_CONCURRENCY, f"{app.receiver.peak} callbacks were sent at once"
        app.client.portal.call(app.receiver.gate.set)
        wait_until(app, lambda: app.runner.settled, "every ending is done")
        assert delivered_ids(app) == sorted(job_ids)
        assert list(app.store.inputs()) == []


def test_endings_beyond_callback_held_max_wait_in_the_store_and_are_delivered_when_room_frees(
    tmp_path, local_backend, job_ctx
):
    app = make_jobs_app(tmp_path, local_backend, job_ctx, callback_concurrency=2, callback_held_max=4)
    with app.client:
        app.receiver.gate = app.client.portal.call(asyncio.Event)
        job_ids = submit(app, 12)
        statuses = lambda: [app.client.get(f"/v1/jobs/{job_id}").json()["status"] for job_id in job_ids]  # noqa: E731
        wait_until(app, lambda: set(statuses()) == {"failed"}, "every job has ended")
        wait_until(app, lambda: app.receiver.in_flight == 2, "the receivers are busy")
        app.client.portal.call(asyncio.sleep, 0.3)
        assert len(app.runner._queue) == 4  # held: 2 sending, 2 waiting for a slot
        assert app.receiver.peak == 2
        assert len(list(app.store.inputs())) == 12  # the other 8 wait in the store, inputs kept
        assert not app.runner.settled
        app.client.portal.call(app.receiver.gate.set)
        wait_until(app, lambda: app.runner.settled, "every ending is done")
        assert delivered_ids(app) == sorted(job_ids)  # each once
        assert app.receiver.peak == 2
        assert list(app.store.inputs()) == []
        states = [app.store.view(ref).state.callback for ref in app.store.refs()]
        assert [(state.attempts, state.delivered_at is not None) for state in states] == [(1, True)] * 12
