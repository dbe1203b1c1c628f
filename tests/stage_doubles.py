"""A backend whose face analysis a test replaces (a late, broken, flaky or lost analyzer), every other stage real."""

from __future__ import annotations

from typing import Any

import numpy as np

from deployments.common.stage import StageCall
from deployments.faces.types import ANALYZE_FACES, Face
from serve_app.backend import Backend


class FaceAnalysisDouble(Backend):
    """``backend`` with ``ANALYZE_FACES`` answered by ``analyze_faces`` (override it; the default is the real one)."""

    def __init__(self, backend: Backend) -> None:
        super().__init__(backend.transport, backend.context)
        self._real = backend

    async def call(self, call: StageCall, *args: Any, **options: Any) -> Any:
        if call == ANALYZE_FACES:
            return await self.analyze_faces(*args)
        return await self._real.call(call, *args, **options)

    async def analyze_faces(self, image: np.ndarray) -> list[Face]:
        return await self._real.call(ANALYZE_FACES, image)
