"""``POST /v1/events/s3`` and ``HEAD``: token check, quick answer, events handed to a real worker (no Ray)."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from serve_app.routes import create_api
from serve_app.runner.routing import build_routing_table
from serve_app.runner.worker import BucketWorker, job_executor
from serve_app.settings import Settings
from storage.local import LocalStore
from tests.unit.runner.bucket_samples import minio_body


class WorkerSink:
    """What the ingress's ``BucketRunnerClient`` does through a handle, done in-process."""

    def __init__(self, worker: BucketWorker) -> None:
        self.worker = worker

    async def submit(self, events):
        return self.worker.submit(events)


@pytest.fixture
def api(tmp_path, local_backend, job_ctx):
    table = build_routing_table(
        [{"name": "drop", "input": str(tmp_path / "in"), "output": str(tmp_path / "out"), "task": "restore"}], job_ctx
    )
    worker = BucketWorker(table, job_executor(local_backend, job_ctx), job_ctx)
    app = create_api()
    app.state.backend = local_backend
    app.state.settings = Settings(events_token="let-me-in")
    app.state.event_sink = WorkerSink(worker)
    return app


AUTH = {"Authorization": "Bearer let-me-in"}
JSON_AUTH = {**AUTH, "Content-Type": "application/json"}  # what MinIO sends; json= in a test adds the type itself


def test_a_minio_event_is_accepted_and_the_result_appears(api, tmp_path, photo_jpeg):
    LocalStore(tmp_path / "in").put("new photo.jpg", photo_jpeg, content_type="image/jpeg")
    with TestClient(api) as client:
        answer = client.post("/v1/events/s3", content=json.dumps(minio_body("in", "new+photo.jpg")), headers=JSON_AUTH)
        assert (answer.status_code, answer.json()) == (200, {"received": 1, "accepted": 1})
        worker = api.state.event_sink.worker
        client.portal.call(worker.drain)
    assert LocalStore(tmp_path / "out").exists("new photo.json")


def test_events_for_no_route_and_removals_are_ignored(api):
    body = minio_body("other-bucket", "a.jpg")
    body["Records"].append(minio_body("in", "b.jpg", name="s3:ObjectRemoved:Delete")["Records"][0])
    with TestClient(api) as client:
        answer = client.post("/v1/events/s3", json=body, headers=AUTH)
    assert answer.json() == {"received": 1, "accepted": 0}


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "let-me-in"}])
def test_a_missing_or_wrong_token_is_refused_with_json(api, headers):
    with TestClient(api) as client:
        answer = client.post("/v1/events/s3", json=minio_body("in", "a.jpg"), headers=headers)
    assert answer.status_code == 401
    assert answer.json()["error"]["code"] == "unauthorized"
    assert answer.headers["www-authenticate"] == "Bearer"


def test_head_answers_minios_liveness_probe_without_a_token(api):
    with TestClient(api) as client:
        assert client.head("/v1/events/s3").status_code == 200


def test_a_bad_body_is_a_422_naming_the_problem(api):
    with TestClient(api) as client:
        answer = client.post("/v1/events/s3", content=b'{"Records": "x"}', headers=JSON_AUTH)
    assert answer.status_code == 422
    assert answer.json()["error"] == {"code": "invalid_parameter", "message": "'Records' must be a list, got str"}


def test_without_a_runner_the_webhook_answers_503_so_minio_keeps_the_event(api):
    api.state.event_sink = None
    with TestClient(api) as client:
        answer = client.post("/v1/events/s3", json=minio_body("in", "a.jpg"), headers=AUTH)
    assert answer.status_code == 503
    assert answer.json()["error"]["code"] == "bucket_runner_unavailable"
