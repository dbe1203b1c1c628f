"""What a job may await: the ``Backend`` protocol. No Ray here.

The Serve ingress and the bucket runner implement it with DeploymentHandles (``serve_app.handles``, so
``@serve.batch`` groups work across requests), tests and the CLI with in-process engines (``serve_app.local_backend``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np

from deployments.cartoon.types import StyleJob, Stylized
from deployments.colorize.types import ColorizeJob, PredictedColor
from deployments.common.engine import EngineInfo
from deployments.common.weights import ModelSpec
from deployments.faces.types import Face
from deployments.idphoto.matte import MATTE_MODELS, LowResMatte, Matting
from deployments.restore.types import BackgroundEngine, FaceToRestore, RestoredFace, TileToUpscale, UpscaledTile


def matte_engine_info(manifest: Mapping[str, ModelSpec], matting: Matting) -> EngineInfo:
    """The matting engine behind ``Backend.segment_portrait`` in ``matting`` mode, as results report it."""
    spec = manifest[MATTE_MODELS[matting]]
    return EngineInfo(spec.engine, neural=True, weights=spec.name, sha256=spec.sha256)


def restore_template(manifest: Mapping[str, ModelSpec], model: str) -> str:
    """The alignment template the restorer of ``model`` expects (the manifest's ``args.template``)."""
    return str(manifest[model].args["template"])


class Backend(Protocol):
    """The model stages one request may await; each call is one item of a batched deployment."""

    async def analyze_faces(self, image: np.ndarray) -> list[Face]: ...

    async def restore_face(self, face: FaceToRestore, model: str) -> RestoredFace: ...

    async def default_restore_model(self) -> str:
        """The model a restore job without ``model`` gets: the first available in the service's order."""
        ...

    async def background_engine(self, scale: int) -> BackgroundEngine | None:
        """The neural engine that upscales the background by ``scale``; None when only Lanczos is available."""
        ...

    async def upscale_tile(self, tile: TileToUpscale) -> UpscaledTile: ...

    def restore_template(self, model: str) -> str:
        """The alignment template the restorer of ``model`` expects (e.g. ``gpen-512``)."""
        ...

    async def segment_portrait(self, image: np.ndarray, matting: Matting) -> LowResMatte: ...

    async def stylize_head(self, job: StyleJob) -> Stylized: ...

    async def stylize_background(self, job: StyleJob) -> Stylized: ...

    async def default_colorize_model(self) -> str:
        """The colorization model a job without ``model`` gets: the first whose weights are present."""
        ...

    async def colorize(self, job: ColorizeJob) -> PredictedColor:
        """The colours DDColor predicts for ``job``; ``ModelUnavailable`` (with the fetch command) without weights."""
        ...

    def matte_engine(self, matting: Matting) -> EngineInfo:
        """The matting engine and weights behind ``segment_portrait`` in ``matting`` mode."""
        ...

    async def health(self) -> dict[str, dict[str, Any]]: ...

    def observe_job(self, task: str, outcome: str, engine: str, bytes_in: int, bytes_out: int) -> None:
        """Count one finished job (``outcome``: ``ok`` or the error code) for the metrics."""
        ...
