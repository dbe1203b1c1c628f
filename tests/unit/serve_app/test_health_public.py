"""The open health and listing routes are cheap and discreet (#21 row 17): one fan-out to the deployments per
``health_cache_s`` whatever the request rate, and without ``PORTRAIT_PUBLIC_HEALTH_DETAIL`` ``/healthz`` says only
``status`` and ``version``: no bucket names, local paths, exception texts or pids."""

from __future__ import annotations

import asyncio

from fastapi.testclient import TestClient

from serve_app import __version__
from serve_app.health import HealthCache
from serve_app.routes import create_api
from serve_app.settings import Settings

# What the deployments tell /healthz: enough to help an attacker (a bucket, a local path, an exception text, a pid).
REVEALING = {
    "FaceAnalyzer": {"status": "ok", "engine": "mediapipe", "pid": 4242, "replica": "FaceAnalyzer#abc"},
    "BucketRunner": {
        "status": "degraded",
        "required": False,
        "routes": [
            {"bucket": "s3://acme-private-uploads/in", "folder": "/srv/secret/in", "last_error": "AccessDenied"}
        ],
    },
    "CartoonBackground": {"status": "ok", "styles": {"anime": {"engine": "dctnet"}}},
    "CartoonHead": {"status": "ok", "styles": {"anime": {"engine": "dctnet"}}},
}


class CountingBackend:
    """``health`` answers ``REVEALING`` and counts how often the deployments were asked."""

    def __init__(self) -> None:
        self.fan_outs = 0

    async def health(self):
        self.fan_outs += 1
        return REVEALING


def client_for(backend, **settings) -> TestClient:
    app = create_api()
    app.state.backend = backend
    app.state.settings = Settings(**settings)
    return TestClient(app)


def test_healthz_tells_the_public_only_status_and_version():
    answer = client_for(CountingBackend()).get("/healthz")
    assert answer.status_code == 200
    assert answer.json() == {"status": "degraded", "version": __version__}


def test_healthz_shows_every_report_where_the_operator_allows_it():
    body = client_for(CountingBackend(), public_health_detail=True).get("/healthz").json()
    assert body["deployments"] == REVEALING and body["status"] == "degraded"


def test_the_open_routes_share_one_fan_out_whatever_the_request_rate():
    backend = CountingBackend()
    client = client_for(backend, health_cache_s=60)  # the whole test inside one cache period
    answers = [client.get(path) for path in ("/healthz", "/v1/models", "/v1/cartoon/styles") * 20]
    assert all(answer.status_code == 200 for answer in answers)
    assert backend.fan_outs == 1
    styles = client.get("/v1/cartoon/styles").json()["styles"]
    assert {"name": "anime", "engine": "dctnet", "head_engine": "dctnet"} in styles


def test_callers_arriving_during_a_fetch_share_it_and_a_later_one_refreshes():
    now = [0.0]
    calls = []

    async def fetch():
        calls.append(now[0])
        await asyncio.sleep(0)
        return {"n": len(calls)}

    async def scenario():
        cache = HealthCache(fetch, ttl_s=1.0, clock=lambda: now[0])
        together = await asyncio.gather(*(cache.get() for _ in range(50)))
        now[0] = 0.9
        within = await cache.get()
        now[0] = 1.5
        after = await cache.get()
        return together, within, after

    together, within, after = asyncio.run(scenario())
    assert together == [{"n": 1}] * 50 and within == {"n": 1} and after == {"n": 2}
    assert calls == [0.0, 1.5]


def test_a_failed_fetch_is_not_kept():
    outcomes = [RuntimeError("controller away"), {"status": "ok"}]

    async def fetch():
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    async def scenario():
        cache = HealthCache(fetch, ttl_s=60.0)
        try:
            await cache.get()
        except RuntimeError as exc:
            first = str(exc)
        return first, await cache.get()

    assert asyncio.run(scenario()) == ("controller away", {"status": "ok"})
