"""Per-request orchestration: decode, call the model stages, encode. No Ray here.

A ``Backend`` is whatever can run the model stages: the Serve ingress implements it with DeploymentHandles (so
``@serve.batch`` groups work across requests), tests and the CLI with in-process engines. Heavy CPU work (decode,
warps, encode) runs in worker threads so the ingress event loop keeps answering.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Protocol

import numpy as np

from deployments.cartoon.types import StyleJob, Stylized
from deployments.common.engine import EngineInfo
from deployments.common.image import DecodedImage, decode_image
from deployments.common.weights import ModelSpec
from deployments.faces.types import Face
from deployments.idphoto.matte import MATTE_MODEL, LowResMatte
from deployments.restore.types import RestoredFace
from serve_app.schemas import FaceOut, FacesOut

try:
    SERVICE_VERSION = version("portrait-serve")
except PackageNotFoundError:
    SERVICE_VERSION = "0+unknown"


GPEN_TEMPLATE_SIZES = (256, 512, 1024)


def restore_template_for(size_px: int) -> str:
    """The alignment template a GPEN restorer of ``size_px`` expects (``gpen-512`` for unknown sizes)."""
    return f"gpen-{size_px if size_px in GPEN_TEMPLATE_SIZES else 512}"


def matte_engine_info(manifest: Mapping[str, ModelSpec]) -> EngineInfo:
    """The segmentation engine behind ``Backend.segment_portrait``, as results report it."""
    spec = manifest[MATTE_MODEL]
    return EngineInfo(spec.engine, neural=True, weights=spec.name, sha256=spec.sha256)


@dataclass(frozen=True)
class Limits:
    max_bytes: int
    max_pixels: int


class Backend(Protocol):
    """The model stages one request may await; each call is one item of a batched deployment."""

    async def analyze_faces(self, image: np.ndarray) -> list[Face]: ...

    async def restore_face(self, crop: np.ndarray, model: str) -> RestoredFace: ...

    def restore_template(self, model: str) -> str:
        """The alignment template the restorer of ``model`` expects (e.g. ``gpen-512``)."""
        ...

    async def segment_portrait(self, image: np.ndarray) -> LowResMatte: ...

    async def stylize_head(self, job: StyleJob) -> Stylized: ...

    async def stylize_background(self, job: StyleJob) -> Stylized: ...

    def matte_engine(self) -> EngineInfo:
        """The segmentation engine and weights behind ``segment_portrait``."""
        ...

    async def health(self) -> dict[str, dict[str, Any]]: ...

    def observe_job(self, task: str, outcome: str, engine: str, bytes_in: int, bytes_out: int) -> None:
        """Count one finished job (``outcome``: ``ok`` or the error code) for the metrics."""
        ...


class Timings:
    """Wall-clock milliseconds per stage of one request, reported in the result metadata."""

    def __init__(self) -> None:
        self.ms: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.ms[name] = round(self.ms.get(name, 0.0) + (time.perf_counter() - start) * 1000.0, 2)


async def decode_upload(data: bytes, limits: Limits) -> DecodedImage:
    return await asyncio.to_thread(decode_image, data, max_bytes=limits.max_bytes, max_pixels=limits.max_pixels)


async def find_faces(backend: Backend, data: bytes, limits: Limits) -> FacesOut:
    timings = Timings()
    with timings.stage("decode"):
        image = await decode_upload(data, limits)
    with timings.stage("analyze"):
        faces = await backend.analyze_faces(image.rgb)
    return FacesOut(
        width=image.width,
        height=image.height,
        faces=[FaceOut(**face.to_json()) for face in faces],
        engine="mediapipe-blazeface+face-mesh",
        timings_ms=timings.ms,
    )
