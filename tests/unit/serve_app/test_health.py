"""``/healthz`` tells the truth within its bound: Serve's replica counts, each deployment asked with a timeout, the
status code a load balancer acts on; ``/livez`` asks no deployment; a job route answers 504 at its timeout."""

from __future__ import annotations

import asyncio

import pytest
from fastapi.testclient import TestClient
from ray.exceptions import ActorDiedError

from deployments.common.errors import StageUnavailable
from deployments.common.weights import load_manifest
from deployments.faces.types import ANALYZE_FACES
from serve_app.backend import Backend
from serve_app.handles import Stages, call_deployment, handle_backend
from serve_app.health import ReplicaCount, overall_status, replica_counts_of
from serve_app.routes import create_api
from serve_app.settings import Settings


class FakeHandle:
    """A deployment's handle: ``health.remote()`` answers ``report`` after ``delay_s``, or raises ``error``;
    ``abandoned`` counts calls the caller gave up on (cancelled) before they answered."""

    def __init__(self, deployment_name: str, report: dict | None = None, *, delay_s: float = 0.0, error=None):
        self.deployment_name = deployment_name
        self.health = self
        self.calls = 0
        self.abandoned = 0
        self._report = report or {"status": "ok"}
        self._delay_s = delay_s
        self._error = error

    def remote(self, *args):
        self.calls += 1

        async def answer():
            try:
                await asyncio.sleep(self._delay_s)
            except asyncio.CancelledError:
                self.abandoned += 1
                raise
            if self._error is not None:
                raise self._error
            return dict(self._report)

        return answer()


def stages(**handles: FakeHandle) -> Stages:
    defaults = {
        name: FakeHandle(name)
        for name in (
            "FaceAnalyzer",
            "PortraitMatter",
            "CartoonHead",
            "CartoonBackground",
            "BackgroundUpscaler",
            "Colorizer",
        )
    }
    return {**defaults, "FaceRestorer512": FakeHandle("FaceRestorer512"), **handles}


def manifest():
    return load_manifest(Settings().models_manifest)


def backend(stage_record: Stages, counts: dict[str, ReplicaCount] | None = None, **options) -> Backend:
    async def replica_counts():
        return counts

    return handle_backend(
        stage_record, manifest(), replica_counts=replica_counts if counts is not None else None, **options
    )


def running(n: int, target: int | None = None, min_replicas: int = 1) -> ReplicaCount:
    return ReplicaCount(
        running=n, target=n if target is None else target, min_replicas=min_replicas, serve_status="HEALTHY"
    )


def test_every_deployment_answering_is_ok():
    report = asyncio.run(backend(stages()).health())
    assert set(report) == {
        "FaceAnalyzer",
        "PortraitMatter",
        "CartoonHead",
        "CartoonBackground",
        "BackgroundUpscaler",
        "Colorizer",
        "FaceRestorer512",
    }
    assert overall_status(report) == "ok"


def test_a_deployment_that_does_not_answer_is_reported_within_the_bound():
    slow = FakeHandle("FaceAnalyzer", delay_s=30)
    report = asyncio.run(backend(stages(FaceAnalyzer=slow), health_timeout_s=0.3).health())
    assert report["FaceAnalyzer"] == {"status": "failing", "reason": "no answer within 0.3 s"}
    assert slow.abandoned == 1  # given up at the bound, not awaited
    assert overall_status(report) == "failing"


def test_a_slow_deployment_with_running_replicas_is_degraded_not_failing():
    """Serve counts its replicas as running: busy, or one being lost while another serves."""
    slow = FakeHandle("FaceAnalyzer", delay_s=30)
    counts = {"FaceAnalyzer": running(2)}
    report = asyncio.run(backend(stages(FaceAnalyzer=slow), counts, health_timeout_s=0.4).health())
    assert report["FaceAnalyzer"]["status"] == "degraded"
    assert report["FaceAnalyzer"]["reason"].startswith("2 replicas running, none answered within")
    assert overall_status(report) == "degraded"


def test_no_running_replica_is_failing_with_the_reason_and_the_deployment_is_not_asked():
    lost = FakeHandle("FaceAnalyzer", delay_s=30)
    counts = {"FaceAnalyzer": ReplicaCount(0, 2, 2, "UNHEALTHY", "replica died with its node")}
    report = asyncio.run(backend(stages(FaceAnalyzer=lost), counts).health())
    assert report["FaceAnalyzer"] == {
        "status": "failing",
        "reason": "no running replica (target 2, Serve says UNHEALTHY: replica died with its node)",
        "replicas": {"running": 0, "target": 2, "serve_status": "UNHEALTHY"},
    }
    assert lost.calls == 0
    assert overall_status(report) == "failing"


def test_a_model_scaled_to_zero_is_idle_and_stays_asleep():
    """Asking it would start a replica (a GPU) on every load-balancer probe."""
    asleep = FakeHandle("FaceRestorer512")
    counts = {"FaceRestorer512": ReplicaCount(0, 0, 0, "HEALTHY")}
    report = asyncio.run(backend(stages(FaceRestorer512=asleep), counts).health())
    assert report["FaceRestorer512"]["status"] == "idle"
    assert asleep.calls == 0
    assert overall_status(report) == "ok"


def test_a_model_starting_from_zero_is_degraded():
    counts = {"FaceRestorer512": ReplicaCount(0, 1, 0, "UPSCALING")}
    report = asyncio.run(backend(stages(FaceRestorer512=FakeHandle("FaceRestorer512")), counts).health())
    assert report["FaceRestorer512"]["status"] == "degraded"
    assert overall_status(report) == "degraded"


def test_fewer_replicas_than_wanted_is_degraded_with_the_count():
    counts = {"FaceAnalyzer": running(1, target=2)}
    report = asyncio.run(backend(stages(), counts).health())
    assert report["FaceAnalyzer"]["status"] == "degraded"
    assert report["FaceAnalyzer"]["reason"] == "1 of 2 replicas running"
    assert report["FaceAnalyzer"]["replicas"] == {"running": 1, "target": 2, "serve_status": "HEALTHY"}


def test_the_count_joins_a_deployments_own_reason():
    fallback = FakeHandle("FaceAnalyzer", {"status": "degraded", "reason": "classic engine: no weights"})
    report = asyncio.run(backend(stages(FaceAnalyzer=fallback), {"FaceAnalyzer": running(1, target=2)}).health())
    assert report["FaceAnalyzer"]["status"] == "degraded"
    assert report["FaceAnalyzer"]["reason"] == "classic engine: no weights; 1 of 2 replicas running"


def test_a_controller_that_does_not_answer_degrades_and_every_deployment_is_still_asked():
    controller = FakeHandle("SERVE_CONTROLLER", delay_s=30)

    slow_controller = handle_backend(stages(), manifest(), replica_counts=controller.remote)
    report = asyncio.run(slow_controller.health())
    assert controller.abandoned == 1
    assert report["Serve"] == {
        "status": "degraded",
        "required": False,
        "reason": "the Serve controller did not answer within 1.0 s; replica counts unknown",
    }
    assert report["FaceAnalyzer"]["status"] == "ok"
    assert overall_status(report) == "degraded"


def test_a_failing_bucket_runner_degrades_but_does_not_fail_the_job_routes():
    service = backend(stages(), watched={"BucketRunner": FakeHandle("BucketRunner", error=ActorDiedError())})
    report = asyncio.run(service.health())
    assert report["BucketRunner"]["status"] == "failing" and report["BucketRunner"]["required"] is False
    assert overall_status(report) == "degraded"


def test_replica_counts_are_read_from_the_controllers_instance_details():
    details = {
        "applications": {
            "portrait": {
                "deployments": {
                    "FaceAnalyzer": {
                        "status": "HEALTHY",
                        "message": "",
                        "target_num_replicas": 2,
                        "deployment_config": {"num_replicas": 2},
                        "replicas": [{"state": "RUNNING"}, {"state": "STARTING"}],
                    },
                    "FaceRestorer512": {
                        "status": "HEALTHY",
                        "target_num_replicas": 0,
                        "deployment_config": {"autoscaling_config": {"min_replicas": 0, "max_replicas": 16}},
                        "replicas": [],
                    },
                }
            }
        }
    }
    assert replica_counts_of(details, "portrait") == {
        "FaceAnalyzer": ReplicaCount(running=1, target=2, min_replicas=2, serve_status="HEALTHY"),
        "FaceRestorer512": ReplicaCount(running=0, target=0, min_replicas=0, serve_status="HEALTHY"),
    }
    assert replica_counts_of(details, "another-app") == {}


def test_the_controllers_enums_read_as_their_values():
    """In a replica the controller's details carry Serve's enums, not their JSON strings."""
    from ray.serve._private.common import DeploymentStatus, ReplicaState

    details = {
        "applications": {
            "portrait": {
                "deployments": {
                    "BucketRunner": {
                        "status": DeploymentStatus.UNHEALTHY,
                        "target_num_replicas": 1,
                        "deployment_config": {"num_replicas": 1},
                        "replicas": [{"state": ReplicaState.RUNNING}, {"state": ReplicaState.STARTING}],
                    }
                }
            }
        }
    }
    assert replica_counts_of(details, "portrait")["BucketRunner"] == ReplicaCount(1, 1, 1, "UNHEALTHY")


def test_a_replica_lost_under_a_call_is_a_503_the_caller_may_retry():
    class Lost:
        def remote(self, *args):
            async def answer():
                raise ActorDiedError()

            return answer()

    with pytest.raises(StageUnavailable) as info:
        asyncio.run(call_deployment(Lost(), "image"))
    assert (info.value.http_status, info.value.code) == (503, "unavailable")


# The HTTP side --------------------------------------------------------------------------------------------------


class ReportingBackend:
    """A backend whose ``health`` is a fixed report and whose face analysis takes ``analyze_s``; ``abandoned``
    counts analyses the caller gave up on."""

    def __init__(self, report: dict, analyze_s: float = 0.0) -> None:
        self._report = report
        self._analyze_s = analyze_s
        self.abandoned = 0

    async def health(self):
        return self._report

    async def call(self, call, image):
        assert call == ANALYZE_FACES
        try:
            await asyncio.sleep(self._analyze_s)
        except asyncio.CancelledError:
            self.abandoned += 1
            raise
        return []


def client_for(service, **settings) -> TestClient:
    app = create_api()
    app.state.backend = service
    app.state.settings = Settings(**settings)
    return TestClient(app, raise_server_exceptions=False)


@pytest.mark.parametrize(
    ("states", "code", "status"),
    [
        ({"FaceAnalyzer": "ok", "FaceRestorer512": "idle"}, 200, "ok"),
        ({"FaceAnalyzer": "ok", "FaceRestorer512": "degraded"}, 200, "degraded"),
        ({"FaceAnalyzer": "failing", "FaceRestorer512": "ok"}, 503, "failing"),
    ],
)
def test_healthz_status_code_tells_a_load_balancer_whether_to_send_traffic(states, code, status):
    report = {name: {"status": state} for name, state in states.items()}
    answer = client_for(ReportingBackend(report), public_health_detail=True).get("/healthz")
    assert (answer.status_code, answer.json()["status"]) == (code, status)
    assert answer.json()["deployments"] == report


def test_livez_asks_no_deployment():
    class NoBackend:
        def __getattr__(self, name):
            raise AssertionError(f"/livez called backend.{name}")

    answer = client_for(NoBackend()).get("/livez")
    assert answer.status_code == 200 and answer.json()["status"] == "alive"


def test_a_job_that_outlives_the_request_timeout_is_a_504_timeout(photo_jpeg):
    service = ReportingBackend({}, analyze_s=30.0)
    answer = client_for(service, request_timeout_s=0.2).post(
        "/v1/faces", files={"image": ("me.jpg", photo_jpeg, "image/jpeg")}
    )
    assert answer.status_code == 504 and service.abandoned == 1
    error = answer.json()["error"]
    assert error.pop("request_id")
    assert error == {"code": "timeout", "message": "no answer within 0.2 s; retry later", "details": {"timeout_s": 0.2}}


def test_a_request_before_the_backend_is_attached_is_a_503_with_retry_after(photo_jpeg):
    app = create_api()  # no app.state.backend yet: the ingress replica is still starting
    answer = TestClient(app, raise_server_exceptions=False).post(
        "/v1/faces", files={"image": ("me.jpg", photo_jpeg, "image/jpeg")}
    )
    assert (answer.status_code, answer.headers["retry-after"]) == (503, "5")
    error = answer.json()["error"]
    assert error.pop("request_id")
    assert error == {
        "code": "unavailable",
        "message": "the service is starting: no backend is attached yet; retry in a few seconds",
    }
