"""The key guard in front of the real app (local engines, no Ray): whole bodies, status codes and headers."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from serve_app import __version__
from serve_app.auth import ApiKeyIn, Gate, KeyRing, LimitBook, LocalLimiter, hash_key
from serve_app.routes import create_api
from serve_app.settings import Settings

KEYS = {
    "pk_full": {"id": "full"},
    "pk_idphoto": {"id": "idphoto-only", "tasks": ["idphoto"]},
    "pk_slow": {"id": "slow", "rate_per_s": 0.001, "burst": 2},
    "pk_quota": {"id": "quota", "daily_quota": 1},
}


def keyed_client(backend, keys: dict[str, dict] = KEYS) -> TestClient:
    app = create_api()
    app.state.backend = backend
    app.state.settings = Settings()
    ring = KeyRing([ApiKeyIn.model_validate({**spec, "sha256": hash_key(token)}) for token, spec in keys.items()])
    app.state.gate = Gate(ring, LocalLimiter(LimitBook()))
    return TestClient(app, raise_server_exceptions=False)


@pytest.fixture
def client(local_backend) -> TestClient:
    return keyed_client(local_backend)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_a_job_route_without_a_key_is_401_with_a_challenge(client, photo_jpeg):
    answer = client.post("/v1/restore", files={"image": ("me.jpg", photo_jpeg, "image/jpeg")})
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"] == 'Bearer realm="portrait"'
    assert answer.json() == {
        "error": {
            "code": "unauthorized",
            "message": "this service needs an API key: send Authorization: Bearer <key> (or X-API-Key: <key>)",
        }
    }


def test_a_wrong_key_is_401_and_says_so(client):
    answer = client.get("/v1/models", headers=bearer("pk_nope"))
    assert answer.status_code == 401
    assert answer.json()["error"]["message"].startswith("the API key is not valid")


@pytest.mark.parametrize(
    "path", ["/v1/models", "/v1/idphoto/specs", "/v1/jobs", "/v1/images/edits", "/v1/chat/completions", "/api/cartoon"]
)
def test_every_api_path_needs_a_key(client, path):
    answer = client.post(path) if path.endswith(("edits", "completions", "cartoon")) else client.get(path)
    assert answer.status_code == 401, path


def test_the_key_may_come_as_x_api_key(client):
    assert client.get("/v1/idphoto/specs", headers={"X-API-Key": "pk_full"}).status_code == 200


def test_a_key_limited_to_idphoto_gets_403_on_restore(client, photo_jpeg):
    files = {"image": ("me.jpg", photo_jpeg, "image/jpeg")}
    answer = client.post("/v1/restore", files=files, headers=bearer("pk_idphoto"))
    assert answer.status_code == 403
    assert answer.json() == {
        "error": {
            "code": "forbidden",
            "message": "key 'idphoto-only' may not run 'restore'",
            "details": {"task": "restore", "allowed_tasks": ["idphoto"]},
        }
    }
    assert client.post("/v1/idphoto", files=files, headers=bearer("pk_idphoto")).status_code == 200


def test_a_key_over_its_rate_gets_429_with_retry_after(client):
    assert [client.get("/v1/idphoto/specs", headers=bearer("pk_slow")).status_code for _ in range(2)] == [200, 200]
    answer = client.get("/v1/idphoto/specs", headers=bearer("pk_slow"))
    assert answer.status_code == 429
    assert answer.json()["error"]["code"] == "rate_limited"
    assert 999 <= int(answer.headers["retry-after"]) <= 1000  # one token per 1000 s


def test_a_key_past_its_daily_quota_gets_429_quota_exceeded(client, photo_jpeg):
    files = {"image": ("me.jpg", photo_jpeg, "image/jpeg")}
    assert client.post("/v1/cartoon", files=files, headers=bearer("pk_quota")).status_code == 200
    answer = client.post("/v1/cartoon", files=files, headers=bearer("pk_quota"))
    assert (answer.status_code, answer.json()["error"]["code"]) == (429, "quota_exceeded")
    assert 1 <= int(answer.headers["retry-after"]) <= 86400
    assert client.get("/v1/idphoto/specs", headers=bearer("pk_quota")).status_code == 200  # reading is not a job


def test_usage_shows_the_key_its_own_limits_and_spending(client, photo_jpeg):
    client.post("/v1/idphoto", files={"image": ("me.jpg", photo_jpeg, "image/jpeg")}, headers=bearer("pk_idphoto"))
    body = client.get("/v1/usage", headers=bearer("pk_idphoto")).json()
    assert {name: value for name, value in body.items() if name != "day"} == {
        "key": "idphoto-only",
        "jobs_today": 1,
        "daily_quota": None,
        "remaining_today": None,
        "rate_per_s": None,
        "burst": 1.0,
        "tokens": 1.0,
        "tasks": ["idphoto"],
    }


def test_liveness_the_page_and_the_bucket_webhook_stay_open(client):
    assert client.get("/livez").status_code == 200
    assert client.get("/").status_code == 200
    assert client.head("/v1/events/s3").status_code == 200


def test_healthz_without_a_key_says_only_the_verdict(client):
    detailed = client.get("/healthz", headers=bearer("pk_full")).json()
    assert {"status", "version", "deployments", "models"} <= set(detailed)
    assert client.get("/healthz").json() == {"status": detailed["status"], "version": __version__}


def test_without_keys_the_service_is_open_as_before(local_backend, photo_jpeg):
    client = keyed_client(local_backend, keys={})
    answer = client.post("/v1/restore", files={"image": ("me.jpg", photo_jpeg, "image/jpeg")})
    assert answer.status_code == 200
    assert client.get("/v1/usage").status_code == 404


def test_the_openai_routes_refuse_a_task_the_key_may_not_run(client, photo_jpeg):
    files = {"image": ("me.jpg", photo_jpeg, "image/jpeg")}
    answer = client.post(
        "/v1/images/edits", files=files, data={"prompt": "restore this old photo"}, headers=bearer("pk_idphoto")
    )
    assert answer.status_code == 403
    assert answer.json()["error"]["code"] == "forbidden"
