"""The ``Backend`` of ``serve_app.backend`` over DeploymentHandles: what the ingress and the bucket runner share.

Each call is one item of a batched deployment, so concurrent requests (and the faces of one photo, awaited together)
share forward passes. Imports no torch: records from the model replicas are torch-free.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from ray.serve.exceptions import BackPressureError
from ray.serve.handle import DeploymentHandle

from deployments.cartoon.types import StyleJob, Stylized
from deployments.common.deployment import record_job
from deployments.common.engine import EngineInfo
from deployments.common.errors import InvalidParameter, Overloaded
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


class HandleBackend:
    def __init__(self, stages: Stages, manifest: Mapping[str, ModelSpec]) -> None:
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
        names = list(self._probes)
        reports = await asyncio.gather(*(self._probes[name].health.remote() for name in names), return_exceptions=True)
        result: dict[str, dict[str, Any]] = {}
        for name, report in zip(names, reports):
            if isinstance(report, BaseException):
                logger.warning("health probe of %s failed: %s", name, report)
                result[name] = {"status": "failing", "error": f"{type(report).__name__}: {report}"}
            else:
                result[name] = report
        return result

    def watch(self, name: str, handle: DeploymentHandle) -> None:
        """Add a deployment to the ``health`` report (the bucket runner, when the app has one)."""
        self._probes[name] = handle

    def observe_job(self, task: str, outcome: str, engine: str, bytes_in: int, bytes_out: int) -> None:
        record_job(task, outcome, engine, bytes_in, bytes_out)

    @staticmethod
    def _pick(handles: dict[str, DeploymentHandle], model: str) -> DeploymentHandle:
        try:
            return handles[model]
        except KeyError:
            raise InvalidParameter(f"model {model!r} is not deployed here; deployed: {sorted(handles)}") from None


async def call_deployment(method: Any, *args: Any) -> Any:
    """One call to a model deployment; a full queue there becomes our 503 ``Overloaded`` (with ``Retry-After``)."""
    try:
        return await method.remote(*args)
    except BackPressureError as exc:
        raise Overloaded("the service is at capacity; retry in a few seconds", details={"stage": str(exc)}) from exc


class BucketRunnerClient:
    """The ingress's view of the ``BucketRunner`` deployment: an ``EventSink`` for the webhook route."""

    def __init__(self, runner: DeploymentHandle) -> None:
        self._runner = runner

    async def submit(self, events: list) -> int:
        """A full runner queue is our 503 ``Overloaded`` too: MinIO then keeps the events and redelivers them."""
        return await call_deployment(self._runner.submit, list(events))
