"""A synchronous request that plans more rendering than the service allows one (``Settings.sync_render_mp_steps``,
megapixels × steps) becomes the job ``POST /v1/jobs`` would make of it: 202 with its status URL, its options kept.
Where no jobs API runs, it is refused before any work: 422 ``render_needs_job``."""

from __future__ import annotations

from fastapi.testclient import TestClient

from serve_app.routes import create_api
from serve_app.settings import Settings

# a 1024² portrait of 30 steps, two candidates: 2 × 30 × 1.05 MP = 62.9 megapixel-steps, over the default 8
LONG = {"style": "business", "width": "1024", "height": "1024", "steps": "30", "count": "2"}


def files_of(photo: bytes) -> dict:
    return {"image": ("me.jpg", photo, "image/jpeg")}


def test_a_render_over_the_sync_budget_is_accepted_as_a_job_with_its_options(jobs_app, photo_jpeg):
    answer = jobs_app.client.post("/v1/portrait", files=files_of(photo_jpeg), data={**LONG, "seed": "7"})
    assert answer.status_code == 202, answer.text
    accepted = answer.json()
    assert answer.headers["location"] == accepted["status_url"] == f"/v1/jobs/{accepted['id']}"
    assert accepted["accepted_as_job"] == {"planned_mp_steps": 62.91, "sync_mp_steps": 8.0}
    job = jobs_app.client.get(accepted["status_url"]).json()
    assert job["task"] == "portrait" and job["params"]["seed"] == "7" and job["params"]["steps"] == "30"


def test_a_render_within_the_budget_stays_synchronous(jobs_app, photo_jpeg):
    small = {"width": "256", "height": "256", "steps": "2", "return": "json"}
    answer = jobs_app.client.post("/v1/portrait", files=files_of(photo_jpeg), data=small)
    assert answer.status_code != 202  # this backend has no generative weights: a 503 naming them, here and now
    assert answer.json()["error"]["code"] == "model_unavailable"
    assert jobs_app.client.get("/v1/jobs").json()["jobs"] == []


def test_without_the_jobs_api_the_request_is_refused_before_any_work(local_backend, photo_jpeg):
    app = create_api()
    app.state.backend, app.state.settings = local_backend, Settings()
    refused = TestClient(app, raise_server_exceptions=False).post("/v1/portrait", files=files_of(photo_jpeg), data=LONG)
    assert refused.status_code == 422
    error = refused.json()["error"]
    assert error["code"] == "render_needs_job" and "POST /v1/jobs with task=portrait" in error["message"]
    assert error["details"]["planned_mp_steps"] == 62.91


def test_a_neural_edit_weighs_its_render_and_a_look_weighs_nothing(local_backend, photo_jpeg):
    app = create_api()
    app.state.backend, app.state.settings = local_backend, Settings(sync_render_mp_steps=1.0)
    client = TestClient(app, raise_server_exceptions=False)
    instructed = {"prompt": "make it look like an old Kodak print", "model": "instructpix2pix", "steps": "20"}
    refused = client.post("/v1/edit", files=files_of(photo_jpeg), data=instructed)
    assert refused.json()["error"]["details"]["planned_mp_steps"] == 11.8  # 20 steps at 768²
    looked = client.post("/v1/edit", files=files_of(photo_jpeg), data={"look": "portra"})
    assert looked.status_code == 200, looked.text


def test_the_openai_routes_refuse_a_render_over_the_budget_before_any_work(local_backend, photo_jpeg):
    app = create_api()
    app.state.backend, app.state.settings = local_backend, Settings()
    client = TestClient(app, raise_server_exceptions=False)
    answer = client.post(
        "/v1/images/edits", files={"image": ("me.jpg", photo_jpeg, "image/jpeg")}, data={"prompt": "AI写真"}
    )
    assert answer.status_code == 422 and answer.json()["error"]["code"] == "render_needs_job"
