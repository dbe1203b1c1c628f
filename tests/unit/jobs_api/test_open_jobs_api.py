"""Without keys every caller is one owner (issue #32, finding 6): beyond loopback the jobs API does not start, unless
``args.jobs.open_beyond_loopback`` says the network is trusted; then a job's id is its only handle (the list is 403,
an idempotency conflict names no job), and nobody lists, downloads or deletes a job they were not told the id of."""

from __future__ import annotations

import logging

import pytest

from serve_app.auth import ApiKeyIn, KeyRing, hash_key
from serve_app.jobs import JOBS
from serve_app.jobs_api import JobsOpenToAll, LocalJobQueue, jobs_service
from serve_app.jobs_api.tenancy import logger as tenancy_logger
from serve_app.runner.jobs_config import JobsConfig
from serve_app.runner.jobs_store import JobStore
from tests.unit.jobs_api.conftest import KEYS, make_jobs_app

BEYOND_LOOPBACK = ["0.0.0.0", "::", "10.0.0.7", "portrait.internal"]


def files_of(photo: bytes) -> dict:
    return {"image": ("me.jpg", photo, "image/jpeg")}


def build(tmp_path, host: str, *, keys: KeyRing | None = None, **config):
    jobs = JobsConfig(store=str(tmp_path / "jobs"), **config)
    store = JobStore(jobs.location(None), jobs.s3, JOBS)
    return jobs_service(jobs, store, LocalJobQueue(None), keys=keys or KeyRing([]), http_host=host)


@pytest.mark.parametrize("host", BEYOND_LOOPBACK)
def test_the_jobs_api_without_keys_beyond_loopback_refuses_to_start_and_names_the_fix(tmp_path, host):
    with pytest.raises(JobsOpenToAll) as refused:
        build(tmp_path, host)
    message = str(refused.value)
    assert message.startswith(f"the HTTP host is {host} and no API keys are configured")
    assert "args.auth" in message and "args.jobs.open_beyond_loopback: true" in message


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost"])
def test_on_loopback_without_keys_the_jobs_api_starts_as_one_owner(tmp_path, host):
    assert build(tmp_path, host).ids_are_capabilities is False


def test_with_keys_the_jobs_api_starts_beyond_loopback(tmp_path):
    ring = KeyRing([ApiKeyIn(id="alice", sha256=hash_key("pk_a"))])
    assert build(tmp_path, "0.0.0.0", keys=ring).ids_are_capabilities is False


def test_open_beyond_loopback_starts_with_a_warning(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger=tenancy_logger.name):
        service = build(tmp_path, "0.0.0.0", open_beyond_loopback=True)
    assert service.ids_are_capabilities is True
    assert "open beyond loopback without keys" in caplog.text


@pytest.fixture
def open_app(tmp_path, local_backend, job_ctx):
    app = make_jobs_app(tmp_path, local_backend, job_ctx, http_host="0.0.0.0", open_beyond_loopback=True)
    with app.client:
        yield app


def test_an_open_jobs_api_hands_no_caller_another_callers_jobs(open_app, photo_jpeg):
    """Mine is reached by its id; nothing lists it, so another caller neither downloads nor deletes it."""
    client = open_app.client
    mine = client.post("/v1/jobs", files=files_of(photo_jpeg), data={"task": "cartoon"}).json()["id"]
    open_app.wait(mine)
    listed = client.get("/v1/jobs")
    assert (listed.status_code, listed.json()["error"]["code"]) == (403, "forbidden")
    assert "listing jobs needs an API key" in listed.json()["error"]["message"]
    assert client.get("/v1/jobs?status=succeeded").status_code == 403
    assert client.get(f"/v1/jobs/{mine}/result").status_code == 200  # its id is the handle
    assert client.delete(f"/v1/jobs/{mine}").status_code == 204


def test_an_open_jobs_api_names_no_job_when_an_idempotency_key_is_reused(open_app, photo_jpeg):
    client = open_app.client
    form = {"task": "cartoon", "idempotency_key": "order-17"}
    first = client.post("/v1/jobs", files=files_of(photo_jpeg), data=form)
    other = client.post("/v1/jobs", files=files_of(photo_jpeg), data={**form, "style": "sketch"})
    assert (first.status_code, other.status_code) == (202, 422)
    assert other.json()["error"]["code"] == "idempotency_key_reused"
    assert first.json()["id"] not in other.text
    open_app.wait(first.json()["id"])


def test_keys_beyond_loopback_keep_listing_each_keys_own_jobs(tmp_path, local_backend, job_ctx, photo_jpeg):
    app = make_jobs_app(tmp_path, local_backend, job_ctx, keys=KEYS, http_host="0.0.0.0")
    alice = {"Authorization": "Bearer pk_a"}
    with app.client:
        job_id = app.client.post("/v1/jobs", files=files_of(photo_jpeg), data={"task": "cartoon"}, headers=alice)
        app.wait(job_id.json()["id"], headers=alice)
        assert [job["id"] for job in app.client.get("/v1/jobs", headers=alice).json()["jobs"]] == [job_id.json()["id"]]
        assert app.client.get("/v1/jobs", headers={"Authorization": "Bearer pk_b"}).json() == {"jobs": []}
