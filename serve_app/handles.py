"""The ``Backend`` of ``serve_app.backend`` over DeploymentHandles: what the ingress and the bucket runner share.

Each call is one item of a batched deployment, so concurrent requests (and the faces of one photo, awaited together)
share forward passes. Imports no torch: records from the model replicas are torch-free.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
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
from deployments.common.deployment import record_job
from deployments.common.engine import EngineInfo
from deployments.common.errors import InvalidParameter, Overloaded, StageUnavailable
from deployments.common.weights import ModelSpec
from deployments.faces.types import Face
from deployments.idphoto.matte import MATTING_MODES, LowResMatte, MatteRequest, Matting
from deployments.restore.types import BackgroundEngine, FaceToRestore, RestoredFace, TileToUpscale, UpscaledTile
from serve_app.backend import matte_engine_info, restore_template

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

    def probes(self) -> dict[str, DeploymentHandle]:
        """Every deployment ``/healthz`` asks, under the name it reports."""
        return {
            "FaceAnalyzer": self.analyzer,
            "PortraitMatter": self.matter,
            "CartoonHead": self.cartoon_head,
            "CartoonBackground": self.cartoon_background,
            "BackgroundUpscaler": self.upscaler,
            **{f"FaceRestorer[{name}]": handle for name, handle in self.restorers.items()},
        }


@dataclass(frozen=True)
class ReplicaCount:
    """Serve's view of one deployment: replicas running and wanted, the fewest it may scale to, its status."""

    running: int
    target: int
    min_replicas: int
    serve_status: str
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"running": self.running, "target": self.target, "serve_status": self.serve_status}


ReplicaCounts = Callable[[], Awaitable[Mapping[str, ReplicaCount]]]


def replica_counts_of(details: Mapping[str, Any], app: str) -> dict[str, ReplicaCount]:
    """``ReplicaCount`` per deployment of ``app`` from the controller's instance details (``ServeInstanceDetails``)."""
    deployments = details.get("applications", {}).get(app, {}).get("deployments", {})
    counts = {}
    for name, deployment in deployments.items():
        config = deployment.get("deployment_config", {})
        autoscaling = config.get("autoscaling_config")
        fewest = autoscaling.get("min_replicas", 1) if autoscaling else config.get("num_replicas", 1)
        counts[name] = ReplicaCount(
            running=sum(1 for replica in deployment.get("replicas", []) if _plain(replica.get("state")) == "RUNNING"),
            target=int(deployment.get("target_num_replicas", 0)),
            min_replicas=int(fewest) if isinstance(fewest, int) else 1,
            serve_status=_plain(deployment.get("status", "UNKNOWN")),
            message=str(deployment.get("message", "")),
        )
    return counts


def _plain(value: Any) -> str:
    """An enum from the controller (``DeploymentStatus.UNHEALTHY``) as its value (``UNHEALTHY``)."""
    return str(getattr(value, "value", value))


class ServeReplicaCounts:
    """``ReplicaCounts`` read from the Serve controller, inside a replica. Asking the controller wakes no replica:
    a model scaled to zero stays at zero however often a load balancer polls ``/healthz``."""

    def __init__(self) -> None:
        self._app = serve.get_replica_context().app_name
        self._controller = ray.get_actor(SERVE_CONTROLLER_NAME, namespace=SERVE_NAMESPACE)

    async def __call__(self) -> dict[str, ReplicaCount]:
        return replica_counts_of(await self._controller.get_serve_instance_details.remote(), self._app)


class HandleBackend:
    """``health_timeout_s`` bounds ``health``: a deployment that does not answer in time is reported, not awaited.
    ``replica_counts`` (Serve's view, ``ServeReplicaCounts`` in a replica) lets ``health`` tell a deployment scaled
    to zero from one that lost its replicas, without waking either; without it every deployment is asked."""

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
        self._default_model: str | None = None
        self._background_engines: dict[int, BackgroundEngine | None] = {}
        self._restore_templates = {name: restore_template(manifest, name) for name in self._restorers}
        self._matte_engines = {mode: matte_engine_info(manifest, mode) for mode in MATTING_MODES}
        self._probes = stages.probes()
        self._optional: set[str] = set()  # watched deployments no job route needs
        self._replica_counts = replica_counts
        self._health_timeout_s = health_timeout_s

    async def analyze_faces(self, image: np.ndarray) -> list[Face]:
        return await call_deployment(self._analyzer.analyze, image)

    async def restore_face(self, face: FaceToRestore, model: str) -> RestoredFace:
        return await call_deployment(self._pick(self._restorers, model).restore, face)

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
        return await call_deployment(self._upscaler.upscale, tile)

    async def segment_portrait(self, image: np.ndarray, matting: Matting) -> LowResMatte:
        return await call_deployment(self._matter.segment, MatteRequest(image, matting))

    async def stylize_head(self, job: StyleJob) -> Stylized:
        return await call_deployment(self._cartoon_head.stylize, job)

    async def stylize_background(self, job: StyleJob) -> Stylized:
        return await call_deployment(self._cartoon_background.stylize, job)

    def matte_engine(self, matting: Matting) -> EngineInfo:
        return self._matte_engines[matting]

    def restore_template(self, model: str) -> str:
        self._pick(self._restorers, model)  # refuses a model not deployed here
        return self._restore_templates[model]

    async def health(self) -> dict[str, dict[str, Any]]:
        """Every deployment's report within ``health_timeout_s``: ``status`` ok | idle (scaled to zero) | degraded |
        failing, with a ``reason`` unless ok; ``required: false`` marks one no job route needs."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._health_timeout_s
        counts, serve_report = await self._read_replica_counts(self._health_timeout_s / 2)
        names = list(self._probes)
        reports = await asyncio.gather(*(self._probe(name, counts, deadline) for name in names))
        result = dict(zip(names, reports))
        if serve_report is not None:
            result["Serve"] = serve_report
        return result

    def watch(self, name: str, handle: DeploymentHandle) -> None:
        """Add a deployment no job route needs to the ``health`` report (the bucket runner, when the app has one)."""
        self._probes[name] = handle
        self._optional.add(name)

    async def _read_replica_counts(self, timeout_s: float) -> tuple[Mapping[str, ReplicaCount], dict[str, Any] | None]:
        """Serve's replica counts, or none and a report saying why (the deployments are then asked directly)."""
        if self._replica_counts is None:
            return {}, None
        try:
            return await asyncio.wait_for(self._replica_counts(), timeout_s), None
        except TimeoutError:
            reason = f"the Serve controller did not answer within {timeout_s:.1f} s"
        except Exception as exc:  # reported in /healthz and logged: health must answer whatever broke
            logger.warning("reading replica counts failed: %r", exc)
            reason = f"reading replica counts failed: {type(exc).__name__}: {exc}"
        return {}, {"status": "degraded", "required": False, "reason": f"{reason}; replica counts unknown"}

    async def _probe(self, name: str, counts: Mapping[str, ReplicaCount], deadline: float) -> dict[str, Any]:
        handle = self._probes[name]
        flags = {"required": False} if name in self._optional else {}
        count = counts.get(handle.deployment_name)
        if count is not None and count.running == 0:
            return {**_without_replicas(count), **flags}
        timeout_s = max(0.0, deadline - asyncio.get_running_loop().time())
        try:
            report = dict(await asyncio.wait_for(_ask_health(handle), timeout_s))
        except TimeoutError:
            if count is not None:  # Serve counts running replicas: busy, or one being lost; the others may serve
                reason = f"{count.running} replicas running, none answered within {timeout_s:.1f} s"
                return {"status": "degraded", "reason": reason, "replicas": count.to_json(), **flags}
            return {"status": "failing", "reason": f"no answer within {timeout_s:.1f} s", **flags}
        except Exception as exc:  # reported in /healthz and logged: health must answer whatever broke
            logger.warning("health probe of %s failed: %r", name, exc)
            return {"status": "failing", "reason": f"{type(exc).__name__}: {exc}", **flags}
        if count is not None:
            report["replicas"] = count.to_json()
            if count.running < count.target:
                short = f"{count.running} of {count.target} replicas running"
                report["reason"] = f"{report['reason']}; {short}" if report.get("reason") else short
                if report.get("status", "ok") == "ok":
                    report["status"] = "degraded"
        return {**report, **flags}

    def observe_job(self, task: str, outcome: str, engine: str, bytes_in: int, bytes_out: int) -> None:
        record_job(task, outcome, engine, bytes_in, bytes_out)

    @staticmethod
    def _pick(handles: dict[str, DeploymentHandle], model: str) -> DeploymentHandle:
        try:
            return handles[model]
        except KeyError:
            raise InvalidParameter(f"model {model!r} is not deployed here; deployed: {sorted(handles)}") from None


def _without_replicas(count: ReplicaCount) -> dict[str, Any]:
    """The report of a deployment with no running replica, from Serve's counts alone (asking it would wait)."""
    replicas = count.to_json()
    if count.min_replicas == 0 and count.target == 0:
        return {"status": "idle", "reason": "scaled to zero; the next request starts a replica", "replicas": replicas}
    if count.min_replicas == 0:
        reason = f"starting from zero replicas (target {count.target}); requests wait, then time out with 504"
        return {"status": "degraded", "reason": reason, "replicas": replicas}
    detail = f": {count.message}" if count.message else ""
    reason = f"no running replica (target {count.target}, Serve says {count.serve_status}{detail})"
    return {"status": "failing", "reason": reason, "replicas": replicas}


async def _ask_health(handle: DeploymentHandle) -> Mapping[str, Any]:
    return await handle.health.remote()


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
