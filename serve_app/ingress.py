"""The HTTP ingress deployment: FastAPI routes in front of the model deployments' handles.

Imports no torch (each ingress replica would pay ~140 MiB for it): the model code lives in the model deployments.
(No ``from __future__ import annotations``: Serve resolves the route annotations at run time.)
"""

import asyncio
import logging
from typing import Any

import numpy as np
from ray import serve
from ray.serve.handle import DeploymentHandle

from deployments.faces.types import Face
from serve_app.routes import create_api
from serve_app.settings import get_settings

logger = logging.getLogger(__name__)

@serve.deployment(name="Ingress")
@serve.ingress()
class Ingress:
    """Implements the ``Backend`` protocol of ``serve_app.service`` with DeploymentHandles."""

    def __init__(self, analyzer: DeploymentHandle) -> None:
        self._analyzer = analyzer
        self._model_handles = {"FaceAnalyzer": analyzer}

    def __serve_build_asgi_app__(self):
        """Serve calls this after ``__init__``: the routes get this replica as their backend."""
        api = create_api()
        api.state.backend = self
        api.state.settings = get_settings()
        return api

    async def analyze_faces(self, image: np.ndarray) -> list[Face]:
        return await self._analyzer.analyze.remote(image)

    async def health(self) -> dict[str, dict[str, Any]]:
        names = list(self._model_handles)
        reports = await asyncio.gather(
            *(self._model_handles[name].health.remote() for name in names), return_exceptions=True
        )
        result: dict[str, dict[str, Any]] = {"Ingress": {"status": "ok"}}
        for name, report in zip(names, reports):
            if isinstance(report, BaseException):
                logger.warning("health probe of %s failed: %s", name, report)
                result[name] = {"status": "failing", "error": f"{type(report).__name__}: {report}"}
            else:
                result[name] = report
        return result
