"""What the jobs API promises when things go wrong: a full queue refuses without keeping anything, a cancelled job
loses its data, a restarted runner finishes (and calls back) what was accepted, keys keep jobs apart."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from deployments.common.errors import InvalidParameter, ModelUnavailable
from serve_app.jobs import JOBS
from serve_app.jobs.progress import report_progress
from serve_app.runner.callbacks import SIGNATURE_HEADER, verify
from serve_app.runner.jobs_config import JobsConfig, require_shared_store
from serve_app.runner.jobs_runner import JobsRunner, job_routes
from serve_app.runner.routing import build_routing_table
from serve_app.runner.worker import BucketWorker, job_executor
from tests.stage_doubles import FaceAnalysisDouble
from tests.unit.jobs_api.conftest import KEYS, make_jobs_app


def files_of(photo: bytes) -> dict:
    return {"image": ("me.jpg", photo, "image/jpeg")}


class Holding:
    """An executor that waits until released: jobs stay queued/running while the test looks."""

    def __init__(self, execute) -> None:
        self._execute = execute
        self.release = asyncio.Event()

    async def __call__(self, task, data, params):
        await self.release.wait()
        return await self._execute(task, data, params)


@pytest.fixture
def held_app(tmp_path, local_backend, job_ctx):
    app = make_jobs_app(tmp_path, local_backend, job_ctx, max_queued=1)
    holding = Holding(job_executor(local_backend, job_ctx))
    table = build_routing_table(job_routes(app.runner.config, app.store, JOBS), job_ctx)
    app.runner.attach(BucketWorker(table, holding, job_ctx, on_outcome=app.runner.observe))
    with app.client:
        yield app, holding


def test_a_full_queue_answers_503_with_retry_after_and_keeps_nothing(held_app, photo_jpeg):
    app, holding = held_app
    first = app.client.post("/v1/jobs", files=files_of(photo_jpeg), data={"task": "cartoon"})
    refused = app.client.post("/v1/jobs", files=files_of(photo_jpeg), data={"task": "cartoon"})
    assert first.status_code == 202
    assert (refused.status_code, refused.headers["retry-after"]) == (503, "5")
    assert refused.json()["error"]["code"] == "overloaded"
    assert [ref.id for ref in app.store.refs()] == [first.json()["id"]]
    app.client.portal.call(holding.release.set)
    assert app.wait(first.json()["id"])["status"] == "succeeded"


def test_a_job_the_runner_has_claimed_is_running(held_app, photo_jpeg):
    app, holding = held_app
    job_id = app.client.post("/v1/jobs", files=files_of(photo_jpeg), data={"task": "cartoon"}).json()["id"]
    for _ in range(200):  # until the worker has claimed it and waits in the executor
        if app.client.get(f"/v1/jobs/{job_id}").json()["status"] != "queued":
            break
        app.client.portal.call(asyncio.sleep, 0.05)
    running = app.client.get(f"/v1/jobs/{job_id}").json()
    assert (running["status"], running["progress"]) == ("running", 0.0)
    app.client.portal.call(holding.release.set)
    assert app.wait(job_id)["status"] == "succeeded"


class CountingThenHolding(Holding):
    """A job that has counted a quarter of its steps, then waits until released."""

    async def __call__(self, task, data, params):
        report_progress(0.25, {"steps_done": 5, "steps": 20})
        return await super().__call__(task, data, params)


def test_a_running_job_shows_what_it_counted_and_leaves_no_progress_behind(
    tmp_path, local_backend, job_ctx, photo_jpeg
):
    app = make_jobs_app(tmp_path, local_backend, job_ctx)
    holding = CountingThenHolding(job_executor(local_backend, job_ctx))
    table = build_routing_table(job_routes(app.runner.config, app.store, JOBS), job_ctx)
    app.runner.attach(BucketWorker(table, holding, job_ctx, on_outcome=app.runner.observe))
    with app.client:
        job_id = app.client.post("/v1/jobs", files=files_of(photo_jpeg), data={"task": "cartoon"}).json()["id"]
        for _ in range(200):  # until the job has reported (the first write goes out at once)
            if app.client.get(f"/v1/jobs/{job_id}").json()["progress"] > 0:
                break
            app.client.portal.call(asyncio.sleep, 0.05)
        running = app.client.get(f"/v1/jobs/{job_id}").json()
        assert (running["status"], running["progress"]) == ("running", 0.25)
        assert running["progress_detail"] == {"steps_done": 5, "steps": 20}
        app.client.portal.call(holding.release.set)
        done = app.wait(job_id)
        assert (done["status"], done["progress"], done["progress_detail"]) == ("succeeded", 1.0, None)
        assert not [info.key for info in app.store.root.list("out/") if "/_work/" in f"/{info.key}"]


class AnalyzerDown(FaceAnalysisDouble):
    """Face analysis that is never there: every attempt of a job fails the same way, the job goes back to the queue."""

    async def analyze_faces(self, image):
        raise ModelUnavailable("the face analyzer's weights are missing; fetch them with: portrait models pull")


def test_a_job_sent_back_to_the_queue_says_what_it_waits_for(tmp_path, local_backend, job_ctx, photo_jpeg):
    app = make_jobs_app(tmp_path, AnalyzerDown(local_backend), job_ctx)
    with app.client:
        job_id = app.client.post("/v1/jobs", files=files_of(photo_jpeg), data={"task": "cartoon"}).json()["id"]
        for _ in range(300):  # until its attempts (with their backoff) have failed
            job = app.client.get(f"/v1/jobs/{job_id}").json()
            if job["waiting"] is not None:
                break
            app.client.portal.call(asyncio.sleep, 0.05)
        assert (job["status"], job["waiting"]["code"]) == ("queued", "model_unavailable")
        assert "portrait models pull" in job["waiting"]["message"]


def test_cancelling_a_waiting_job_deletes_its_input_and_says_cancelled(held_app, photo_jpeg):
    app, holding = held_app
    job_id = app.client.post("/v1/jobs", files=files_of(photo_jpeg), data={"task": "cartoon"}).json()["id"]
    cancelled = app.client.delete(f"/v1/jobs/{job_id}")
    assert (cancelled.status_code, cancelled.json()["status"]) == (200, "cancelled")
    assert list(app.store.root.list("in/")) == []
    app.client.portal.call(holding.release.set)
    assert app.wait(job_id)["status"] == "cancelled"
    assert list(app.store.root.list("out/")) == []  # nothing was written for it, or it was removed again


def test_a_restarted_runner_finishes_and_calls_back_what_was_accepted(tmp_path, local_backend, job_ctx, photo_jpeg):
    app = make_jobs_app(tmp_path, local_backend, job_ctx)
    with app.client:
        app.runner.attach(DeadWorker(build_routing_table(job_routes(app.runner.config, app.store, JOBS), job_ctx)))
        form = {"task": "cartoon", "callback_url": "http://127.0.0.1:9/hook"}
        job_id = app.client.post("/v1/jobs", files=files_of(photo_jpeg), data=form).json()["id"]
        restarted = JobsRunner(app.runner.config, app.store, app.runner._keys, post=app.receiver.post)
        table = build_routing_table(job_routes(restarted.config, app.store, JOBS), job_ctx)
        worker = BucketWorker(table, job_executor(local_backend, job_ctx), job_ctx, on_outcome=restarted.observe)
        restarted.attach(worker)
        app.client.portal.call(worker.reconcile_all)  # what a runner does at start
        app.client.portal.call(restarted.drain)
        assert app.client.get(f"/v1/jobs/{job_id}").json()["status"] == "succeeded"
        ((_, body, headers),) = app.receiver.calls
        assert verify("app-secret", headers[SIGNATURE_HEADER], body, now_s=time.time())


class DeadWorker:
    """A runner that died before running anything: it takes jobs and never processes them."""

    def __init__(self, table) -> None:
        self.table = table

    def submit(self, events) -> int:
        return len(list(events))


def test_keys_keep_jobs_apart_and_a_task_the_key_may_not_run_is_403_at_submit(
    tmp_path, local_backend, job_ctx, photo_jpeg
):
    app = make_jobs_app(tmp_path, local_backend, job_ctx, keys=KEYS)
    alice, bob = {"Authorization": "Bearer pk_a"}, {"Authorization": "Bearer pk_b"}
    with app.client:
        assert app.client.post("/v1/jobs", files=files_of(photo_jpeg), data={"task": "cartoon"}).status_code == 401
        forbidden = app.client.post("/v1/jobs", files=files_of(photo_jpeg), data={"task": "cartoon"}, headers=bob)
        assert (forbidden.status_code, forbidden.json()["error"]["code"]) == (403, "forbidden")
        form = {"task": "cartoon", "callback_url": "http://127.0.0.1:9/hook"}
        job_id = app.client.post("/v1/jobs", files=files_of(photo_jpeg), data=form, headers=alice).json()["id"]
        app.wait(job_id, headers=alice)
        assert app.client.get(f"/v1/jobs/{job_id}", headers=bob).status_code == 404
        assert app.client.get("/v1/jobs", headers=bob).json() == {"jobs": []}
        ((_, body, headers),) = app.receiver.calls
        assert verify("alice-secret", headers[SIGNATURE_HEADER], body, now_s=time.time())  # the key's own secret


def test_a_relative_jobs_folder_is_refused_on_a_cluster_without_a_shared_root(tmp_path):
    with pytest.raises(InvalidParameter, match="relative folder on a cluster of 2 nodes"):
        require_shared_store(JobsConfig(), None, nodes=2)
    require_shared_store(JobsConfig(), None, nodes=1)
    require_shared_store(JobsConfig(), tmp_path, nodes=2)
    require_shared_store(JobsConfig(store="s3://portrait-jobs/jobs"), None, nodes=2)


def test_the_default_jobs_folder_is_under_the_buckets_root_and_ignored_by_git(tmp_path):
    assert JobsConfig().location(tmp_path).bucket == str(tmp_path / "buckets" / "jobs")
    repo = Path(__file__).resolve().parents[3]
    if not (repo / ".git").exists() or shutil.which("git") is None:
        return  # not a checkout: nothing to commit by mistake
    job_file = f"{JobsConfig().store}/jobs/owner/id.json"
    ignored = subprocess.run(["git", "check-ignore", "-q", "--no-index", job_file], cwd=repo, check=False)
    assert ignored.returncode == 0  # a laptop's jobs never show up as files to commit
