"""The bucket webhook is closed by default: no start without a token beyond loopback, no blank token, the bearer
scheme in any case, only JSON bodies (a browser's cross-site form POST cannot send one unasked), and a body nested
past the JSON parser's depth is the caller's 422."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from serve_app.routes import create_api
from serve_app.runner.triggers.webhook import EventsTokenRequired, require_events_token
from serve_app.settings import Settings
from tests.unit.runner.bucket_samples import minio_body

TOKEN = "let-me-in"


class CountingSink:
    def __init__(self) -> None:
        self.events = []

    async def submit(self, events):
        self.events.extend(events)
        return len(events)


@pytest.fixture
def client():
    app = create_api()
    app.state.settings = Settings(events_token=TOKEN)
    app.state.event_sink = CountingSink()
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.7", "portrait.internal"])
def test_the_webhook_refuses_to_start_without_a_token_beyond_loopback(host):
    with pytest.raises(EventsTokenRequired, match=f"the HTTP host is {host} and PORTRAIT_EVENTS_TOKEN is not set"):
        require_events_token(Settings(events_token=None), host)
    require_events_token(Settings(events_token=TOKEN), host)  # with a token it starts


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost"])
def test_on_loopback_the_webhook_starts_without_a_token(host):
    require_events_token(Settings(events_token=None), host)


@pytest.mark.parametrize("blank", ["", "   "])
def test_a_blank_events_token_is_refused_at_start(blank, monkeypatch):
    monkeypatch.setenv("PORTRAIT_EVENTS_TOKEN", blank)
    with pytest.raises(ValidationError, match="PORTRAIT_EVENTS_TOKEN is set but blank"):
        Settings()


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER"])
def test_the_bearer_scheme_is_matched_in_any_case(client, scheme):
    answer = client.post(
        "/v1/events/s3", json=minio_body("in", "a.jpg"), headers={"Authorization": f"{scheme} {TOKEN}"}
    )
    assert (answer.status_code, answer.json()) == (200, {"received": 1, "accepted": 1})


@pytest.mark.parametrize("given", ["Bearer ", "Bearer let-me-i", "Bearer let-me-inn", "Basic let-me-in", TOKEN])
def test_a_near_miss_token_is_refused(client, given):
    answer = client.post("/v1/events/s3", json=minio_body("in", "a.jpg"), headers={"Authorization": given})
    assert (answer.status_code, answer.json()["error"]["code"]) == (401, "unauthorized")


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_a_body_that_is_not_declared_json_is_refused_unread(client, content_type):
    """What a cross-site form can send without a CORS preflight: text/plain carrying JSON text."""
    headers = {"Authorization": f"Bearer {TOKEN}"} | ({"Content-Type": content_type} if content_type else {})
    answer = client.post("/v1/events/s3", content=b'{"Records": []}', headers=headers)
    assert (answer.status_code, answer.json()) == (
        415,
        {
            "error": {
                "code": "unsupported_media_type",
                "message": "bucket events are JSON: send them with Content-Type: application/json",
            }
        },
    )
    assert client.app.state.event_sink.events == []


def test_a_deeply_nested_body_is_a_422(client):
    nested = b"[" * 100_000 + b"]" * 100_000
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    answer = client.post("/v1/events/s3", content=nested, headers=headers)
    assert (answer.status_code, answer.json()["error"]) == (
        422,
        {"code": "invalid_parameter", "message": "the event notification cannot be parsed: it is nested too deeply"},
    )
