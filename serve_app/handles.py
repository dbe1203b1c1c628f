"""The ``Backend`` of ``serve_app.service`` over DeploymentHandles: what the ingress and the bucket runner share.

Each call is one item of a batched deployment, so concurrent requests (and the faces of one photo, awaited together)
share forward passes. Imports no torch: records from the model replicas are torch-free.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import numpy as np
from ray.serve.handle import DeploymentHandle

from deployments.common.engine import EngineInfo
from deployments.common.errors import InvalidParameter
from deployments.common.weights import ModelSpec
from deployments.faces.types import Face
from deployments.idphoto.matte import MATTE_MODEL, LowResMatte
from deployments.restore.types import RestoredFace

logger = logging.getLogger(__name__)

GPEN_TEMPLATE_SIZES = (256, 512, 1024)
MATTE_ENGINE = "selfie-segmentation+guided-filter"


class HandleBackend:
    def __init__(
        self,
        analyzer: DeploymentHandle,
        matter: DeploymentHandle,
        restorers: dict[str, DeploymentHandle],
        manifest: dict[str, ModelSpec],
    ) -> None:
        self._analyzer = analyzer
        self._matter = matter
        self._restorers = restorers
        self._restore_sizes = {name: int(manifest[name].args.get("size", 512)) for name in restorers}
        matte_spec = manifest[MATTE_MODEL]
        self._matte_engine = EngineInfo(MATTE_ENGINE, neural=True, weights=matte_spec.name, sha256=matte_spec.sha256)
        self._probes = {
            "FaceAnalyzer": analyzer,
            "PortraitMatter": matter,
            **{f"FaceRestorer[{name}]": handle for name, handle in restorers.items()},
        }

    async def analyze_faces(self, image: np.ndarray) -> list[Face]:
        return await self._analyzer.analyze.remote(image)

    async def restore_face(self, crop: np.ndarray, model: str) -> RestoredFace:
        return await self._pick(self._restorers, model).restore.remote(crop)

    async def segment_portrait(self, image: np.ndarray) -> LowResMatte:
        return await self._matter.segment.remote(image)

    def matte_engine(self) -> EngineInfo:
        return self._matte_engine

    def restore_template(self, model: str) -> str:
        size = self._restore_sizes.get(model, 512)
        return f"gpen-{size if size in GPEN_TEMPLATE_SIZES else 512}"

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

    @staticmethod
    def _pick(handles: dict[str, DeploymentHandle], model: str) -> DeploymentHandle:
        try:
            return handles[model]
        except KeyError:
            raise InvalidParameter(f"model {model!r} is not deployed here; deployed: {sorted(handles)}") from None
