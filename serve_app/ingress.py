"""The HTTP ingress deployment: FastAPI routes in front of the model deployments' handles.

Imports no torch (each ingress replica would pay ~140 MiB for it): the model code lives in the model deployments.
(No ``from __future__ import annotations``: Serve resolves the route annotations at run time.)
"""

import logging

import ray
from ray import serve
from ray.serve._private.constants import SERVE_CONTROLLER_NAME, SERVE_NAMESPACE
from ray.serve.handle import DeploymentHandle

from serve_app.auth import AuthConfig, Gate, load_keys, warn_when_open
from serve_app.auth.deployment import RayLimiter
from serve_app.handles import BucketRunnerClient, ServeReplicaCounts, Stages, app_language_model, handle_backend
from serve_app.instructions import InstructionsConfig
from serve_app.jobs import JOBS
from serve_app.jobs_api import jobs_service
from serve_app.llm import LlmRoute
from serve_app.routes import create_api
from serve_app.runner.jobs_config import JobsConfig
from serve_app.runner.jobs_store import JobStore
from serve_app.runner.triggers.webhook import require_events_token
from serve_app.settings import get_settings

logger = logging.getLogger(__name__)


@serve.deployment(name="Ingress")
@serve.ingress()
class Ingress:
    def __init__(
        self,
        stages: Stages,
        bucket_runner: DeploymentHandle | None = None,
        instructions: InstructionsConfig | None = None,
        auth: AuthConfig | None = None,
        jobs: JobsConfig | None = None,
        llm: DeploymentHandle | None = None,
        llm_route: LlmRoute | None = None,
    ) -> None:
        self._instructions = instructions or InstructionsConfig()
        keys = load_keys(auth or AuthConfig())
        keys.check_tasks(JOBS)
        # The limits live in one named actor every replica shares; without keys there is nothing to limit.
        self._gate = Gate(keys, RayLimiter()) if len(keys) else None
        http_host = _http_host()
        warn_when_open(keys, http_host)
        self._settings = get_settings()
        self._backend = handle_backend(
            stages,
            self._settings.open_model_store().manifest,
            replica_counts=ServeReplicaCounts(),
            health_timeout_s=self._settings.health_timeout_s,
            reporter="Ingress",
            watched={"BucketRunner": bucket_runner} if bucket_runner is not None else None,
            llm=app_language_model(llm_route or LlmRoute(self._instructions.llm), llm),
        )
        self._event_sink = None
        if bucket_runner is not None:
            require_events_token(self._settings, http_host)
            self._event_sink = BucketRunnerClient(bucket_runner)
        self._jobs = None
        if jobs is not None and self._event_sink is not None:  # the jobs run in the bucket runner
            store = JobStore(jobs.location(self._settings.buckets_root), jobs.s3, JOBS)
            self._jobs = jobs_service(jobs, store, self._event_sink, keys=keys, http_host=http_host)

    def __serve_build_asgi_app__(self):
        """Serve calls this after ``__init__``: the routes get the handles' backend."""
        api = create_api()
        api.state.backend = self._backend
        api.state.settings = self._settings
        api.state.event_sink = self._event_sink
        api.state.instructions = self._instructions
        api.state.gate = self._gate
        api.state.jobs = self._jobs
        return api


def _http_host() -> str:
    """The address Serve's proxies listen on (``http_options.host``)."""
    controller = ray.get_actor(SERVE_CONTROLLER_NAME, namespace=SERVE_NAMESPACE)
    return str(ray.get(controller.get_http_config.remote()).host)
