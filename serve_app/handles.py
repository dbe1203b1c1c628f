"""The ``Backend`` of ``serve_app.backend`` over DeploymentHandles: what the ingress and the bucket runner share.

Each call is one item of a batched deployment, so concurrent requests (and the faces of one photo, awaited together)
share forward passes. Imports no torch: records from the model replicas are torch-free.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import ray
from ray import serve
from ray.exceptions import RayActorError
from ray.serve._private.constants import SERVE_CONTROLLER_NAME, SERVE_NAMESPACE
from ray.serve.exceptions import BackPressureError, DeploymentUnavailableError, ReplicaUnavailableError
from ray.serve.handle import DeploymentHandle

from deployments.cartoon.types import StyleJob, Stylized
from deployments.colorize.types import ColorizeJob, PredictedColor
from deployments.common.batching import unwrap
from deployments.common.deployment import record_job
from deployments.common.engine import EngineInfo
from deployments.common.errors import InvalidParameter, Overloaded, StageUnavailable
from deployments.common.weights import ModelSpec
from deployments.faces.types import Face
from deployments.idphoto.matte import MATTING_MODES, LowResMatte, MatteRequest, Matting
from deployments.restore.types import BackgroundEngine, FaceToRestore, RestoredFace, TileToUpscale, UpscaledTile
from serve_app.auth.caller import caller_id
from serve_app.backend import matte_engine_info, restore_template
from serve_app.health import HealthAggregator, ReplicaCount, ReplicaCounts, replica_counts_of
from serve_app.runner.jobs_layout import JobRef

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Stages:
    """The model deployments a job may call, by name. ``build_app`` binds them once and hands the same record to the
    ingress and the bucket runner (Serve swaps each bound deployment for its handle), so both triggers batch together.
    """

    analyzer: DeploymentHandle
    matter: DeploymentHandle
    restorers: Mapping[str, DeploymentHandle]
    cartoon_head: DeploymentHandle
    cartoon_background: DeploymentHandle
    upscaler: DeploymentHandle
    colorizer: DeploymentHandle

    def probes(self) -> dict[str, DeploymentHandle]:
        """Every deployment ``/healthz`` asks, under its deployment name (the one the Serve YAML configures)."""
        handles = [self.analyzer, self.matter, self.cartoon_head, self.cartoon_background, self.upscaler]
        handles.append(self.colorizer)
        return {handle.deployment_name: handle for handle in [*handles, *self.restorers.values()]}


class ServeReplicaCounts:
    """``ReplicaCounts`` read from the Serve controller, inside a replica. Asking the controller wakes no replica:
    a model scaled to zero stays at zero however often a load balancer polls ``/healthz``."""

    def __init__(self) -> None:
        self._app = serve.get_replica_context().app_name
        self._controller = ray.get_actor(SERVE_CONTROLLER_NAME, namespace=SERVE_NAMESPACE)

    async def __call__(self) -> dict[str, ReplicaCount]:
        return replica_counts_of(await self._controller.get_serve_instance_details.remote(), self._app)


class HandleBackend:
    """Jobs' calls go to the handles; ``health`` is the ``HealthAggregator``'s report of every stage (``replica_counts``
    and ``health_timeout_s``: see there)."""

    def __init__(
        self,
        stages: Stages,
        manifest: Mapping[str, ModelSpec],
        *,
        replica_counts: ReplicaCounts | None = None,
        health_timeout_s: float = 2.0,
    ) -> None:
        self._analyzer = stages.analyzer
        self._matter = stages.matter
        self._cartoon_head = stages.cartoon_head
        self._cartoon_background = stages.cartoon_background
        self._restorers = dict(stages.restorers)  # in the order of preference the Serve YAML gives
        self._upscaler = stages.upscaler
        self._colorizer = stages.colorizer
        self._default_model: str | None = None
        self._background_engines: dict[int, BackgroundEngine | None] = {}
        self._restore_templates = {name: restore_template(manifest, name) for name in self._restorers}
        self._matte_engines = {mode: matte_engine_info(manifest, mode) for mode in MATTING_MODES}
        self._health = HealthAggregator(
            stages.probes(), replica_counts=replica_counts, health_timeout_s=health_timeout_s
        )

    async def analyze_faces(self, image: np.ndarray) -> list[Face]:
        return unwrap(await call_deployment(self._analyzer.analyze, image))

    async def restore_face(self, face: FaceToRestore, model: str) -> RestoredFace:
        return unwrap(await call_deployment(self._pick(self._restorers, model).restore, face))

    async def default_restore_model(self) -> str:
        """The first deployed restorer (in the YAML's order) whose weights are loaded; asked once, then remembered."""
        if self._default_model is None:
            for name, handle in self._restorers.items():
                if (await call_deployment(handle.engine_info)).neural:
                    self._default_model = name
                    break
            else:
                self._default_model = next(iter(self._restorers))
        return self._default_model

    async def background_engine(self, scale: int) -> BackgroundEngine | None:
        if scale not in self._background_engines:
            self._background_engines[scale] = await call_deployment(self._upscaler.engine_for, scale)
        return self._background_engines[scale]

    async def upscale_tile(self, tile: TileToUpscale) -> UpscaledTile:
        return unwrap(await call_deployment(self._upscaler.upscale, tile))

    async def segment_portrait(self, image: np.ndarray, matting: Matting) -> LowResMatte:
        return unwrap(await call_deployment(self._matter.segment, MatteRequest(image, matting)))

    async def stylize_head(self, job: StyleJob) -> Stylized:
        return unwrap(await call_deployment(self._cartoon_head.stylize, job))

    async def stylize_background(self, job: StyleJob) -> Stylized:
        return unwrap(await call_deployment(self._cartoon_background.stylize, job))

    async def default_colorize_model(self) -> str:
        """Asked every time (the Colorizer is woken for the job anyway), so weights pulled later count."""
        return await call_deployment(self._colorizer.default_model)

    async def colorize(self, job: ColorizeJob) -> PredictedColor:
        return unwrap(await call_deployment(self._colorizer.colorize, job))

    def matte_engine(self, matting: Matting) -> EngineInfo:
        return self._matte_engines[matting]

    def restore_template(self, model: str) -> str:
        self._pick(self._restorers, model)  # refuses a model not deployed here
        return self._restore_templates[model]

    async def health(self) -> dict[str, dict[str, Any]]:
        return await self._health.reports()

    def watch(self, name: str, handle: DeploymentHandle) -> None:
        """Add a deployment no job route needs to the ``health`` report (the bucket runner, when the app has one)."""
        self._health.watch(name, handle)

    def observe_job(self, task: str, outcome: str, engine: str, bytes_in: int, bytes_out: int) -> None:
        record_job(task, outcome, engine, bytes_in, bytes_out, key=caller_id())

    @staticmethod
    def _pick(handles: dict[str, DeploymentHandle], model: str) -> DeploymentHandle:
        try:
            return handles[model]
        except KeyError:
            raise InvalidParameter(f"model {model!r} is not deployed here; deployed: {sorted(handles)}") from None


# A replica lost under a call (its node or process died): Serve replaces it, the caller may retry.
RAY_LOST_REPLICA = (RayActorError, DeploymentUnavailableError, ReplicaUnavailableError)


async def call_deployment(method: Any, *args: Any) -> Any:
    """One call to a model deployment; a full queue there becomes our 503 ``Overloaded``, a replica lost under the
    call our 503 ``StageUnavailable`` (both with ``Retry-After``)."""
    try:
        return await method.remote(*args)
    except BackPressureError as exc:
        raise Overloaded("the service is at capacity; retry in a few seconds", details={"stage": str(exc)}) from exc
    except RAY_LOST_REPLICA as exc:
        raise StageUnavailable(
            "a model replica was lost (node or process died) and is being replaced; retry in a few seconds",
            details={"stage": type(exc).__name__},
        ) from exc


class BucketRunnerClient:
    """The ingress's view of the ``BucketRunner`` deployment: an ``EventSink`` for the webhook route."""

    def __init__(self, runner: DeploymentHandle) -> None:
        self._runner = runner

    async def submit(self, events: list) -> int:
        """A full runner queue is our 503 ``Overloaded`` too: MinIO then keeps the events and redelivers them."""
        return await call_deployment(self._runner.submit, list(events))

    async def enqueue(self, task: str, ref: JobRef) -> None:
        """A ``JobQueue`` for the jobs API: a refusal comes back as a value (its message), raised here as 503."""
        refusal = await call_deployment(self._runner.enqueue_job, task, ref.owner, ref.id)
        if refusal is not None:
            raise Overloaded(refusal, details={"retry_after_s": 5})
