"""One key cannot take the whole jobs queue (issue #32, finding 7): with keys, each holds at most its share of
``args.jobs.max_queued`` (``max_queued_per_key``, by default a quarter), so the next key's first submit gets in."""

from __future__ import annotations

import pytest

from serve_app.jobs import JOBS
from serve_app.runner.jobs_runner import job_routes
from serve_app.runner.routing import build_routing_table
from tests.unit.jobs_api.conftest import KEYS, make_jobs_app

ALICE, BOB = {"Authorization": "Bearer pk_a"}, {"Authorization": "Bearer pk_b"}


class StuckWorker:
    """Takes jobs and never finishes them: every accepted job stays in the queue."""

    def __init__(self, table) -> None:
        self.table = table

    def submit(self, events) -> int:
        return len(list(events))


def stuck_app(tmp_path, backend, context, **config):
    app = make_jobs_app(tmp_path, backend, context, keys=KEYS, **config)
    app.runner.attach(StuckWorker(build_routing_table(job_routes(app.runner.config, app.store, JOBS), context)))
    return app


def submit(app, photo: bytes, headers: dict, task: str = "cartoon"):
    return app.client.post(
        "/v1/jobs", files={"image": ("me.jpg", photo, "image/jpeg")}, data={"task": task}, headers=headers
    )


def test_one_key_filling_its_share_leaves_room_for_the_next_keys_first_submit(
    tmp_path, local_backend, job_ctx, photo_jpeg
):
    app = stuck_app(tmp_path, local_backend, job_ctx, max_queued=8)
    with app.client:
        accepted = 0
        while (answer := submit(app, photo_jpeg, ALICE)).status_code == 202:
            accepted += 1
            assert accepted <= 8
        assert (answer.status_code, answer.json()["error"]["code"], answer.headers["retry-after"]) == (
            503,
            "overloaded",
            "5",
        )
        bob = submit(app, photo_jpeg, BOB, task="idphoto")
        assert bob.status_code == 202, bob.text
        assert accepted == 2  # a quarter of max_queued
        assert "its share of the jobs queue" in answer.json()["error"]["message"]
        assert len(list(app.store.refs("alice"))) == 2 and len(list(app.store.refs("bob"))) == 1


def test_max_queued_per_key_sets_the_share_and_the_whole_queue_still_bounds_it(
    tmp_path, local_backend, job_ctx, photo_jpeg
):
    app = stuck_app(tmp_path, local_backend, job_ctx, max_queued=4, max_queued_per_key=3)
    with app.client:
        assert [submit(app, photo_jpeg, ALICE).status_code for _ in range(4)] == [202, 202, 202, 503]
        assert [submit(app, photo_jpeg, BOB, task="idphoto").status_code for _ in range(2)] == [202, 503]
        full = submit(app, photo_jpeg, BOB, task="idphoto").json()["error"]["message"]
        assert full == "the jobs queue is full (4 jobs waiting); retry later"


@pytest.mark.parametrize(
    ("max_queued", "per_key", "keyed", "share"),
    [(256, None, True, 64), (3, None, True, 1), (256, None, False, 256), (8, 20, True, 8)],
)
def test_the_share_of_one_key(tmp_path, local_backend, job_ctx, max_queued, per_key, keyed, share):
    extra = {"max_queued_per_key": per_key} if per_key else {}
    app = make_jobs_app(tmp_path, local_backend, job_ctx, keys=KEYS if keyed else None, max_queued=max_queued, **extra)
    assert app.runner.share() == share
