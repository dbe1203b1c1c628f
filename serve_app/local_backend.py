"""A ``Backend`` that runs the real predictors in this process: for tests, the backfill CLI and benchmarks.

The same predictors the model deployments hold (``FaceAnalysisPredictor``, ``MattingPredictor``,
``RestorationPredictor``, ``UpscalePredictor``, ``CartoonPredictor``,
``ColorizationPredictor``), called in worker threads, one item at a time (no
cross-request batching: that is what Serve adds). Predictors hold one interpreter per thread, so concurrent calls are
safe. A restorer whose weights are absent runs the classic restorer, as the deployments do (the cartoon predictors
fall back to their classic paths), and a request without ``model`` gets the first restorer whose weights are present.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from deployments.cartoon.predictor import CartoonPredictor
from deployments.cartoon.styles import cartoon_styles
from deployments.cartoon.types import CARTOON_DEPLOYMENTS, ModelKind, StyleJob, Stylized
from deployments.colorize.predictor import ColorizationPredictor
from deployments.colorize.types import ColorizeJob, PredictedColor
from deployments.common.batching import run_per_item, unwrap
from deployments.common.engine import EngineInfo
from deployments.common.errors import InvalidParameter
from deployments.common.weights import ModelStore
from deployments.faces.analyze import FaceAnalysisConfig, FaceAnalysisPredictor
from deployments.faces.types import Face
from deployments.idphoto.matte import MATTING_MODES, LowResMatte, MatteRequest, Matting
from deployments.idphoto.predictor import MattingPredictor
from deployments.restore.params import RESTORE_MODELS, restorer_deployment
from deployments.restore.restorer import RestorationPredictor
from deployments.restore.types import BackgroundEngine, FaceToRestore, RestoredFace, TileToUpscale, UpscaledTile
from deployments.restore.upscaler import UpscalePredictor, UpscalerOptions
from serve_app.backend import matte_engine_info, restore_template
from serve_app.jobs.deadline import run_stage

logger = logging.getLogger(__name__)

# Real-ESRGAN in this process only for photos up to configs/local.yaml's limit (it costs minutes per megapixel on a
# CPU: docs/BENCHMARKS.md); bigger ones keep Lanczos.
LOCAL_UPSCALER = UpscalerOptions(max_input_megapixels=0.25)


class LocalBackend:
    """Every model stage in-process; restorers load on first use (a model nobody asks for costs nothing)."""

    def __init__(
        self,
        store: ModelStore,
        *,
        restore_models: Sequence[str] = RESTORE_MODELS,
        num_threads: int = 1,
        upscaler: UpscalerOptions = LOCAL_UPSCALER,
    ):
        self._store = store
        self._upscaler_options = upscaler
        self._restore_models = tuple(restore_models)
        self._analyzer = FaceAnalysisPredictor.from_store(store, FaceAnalysisConfig(num_threads=num_threads))
        self._matter = MattingPredictor.from_store(store, num_threads=num_threads)
        self._matte_engines = {mode: matte_engine_info(store.manifest, mode) for mode in MATTING_MODES}
        self._restorers: dict[str, RestorationPredictor] = {}
        self._upscaler: UpscalePredictor | None = None
        self._cartoonizers: dict[ModelKind, CartoonPredictor] = {}
        self._colorizer: ColorizationPredictor | None = None

    async def analyze_faces(self, image: np.ndarray) -> list[Face]:
        return await _run_one(self._analyzer.analyze_batch, image, self._analyzer.admit, "FaceAnalyzer")

    async def restore_face(self, face: FaceToRestore, model: str) -> RestoredFace:
        restorer = self._restorer(model)
        stage = restorer_deployment(self._store.spec(model))
        return await _run_one(restorer.restore, face, restorer.admit, stage)

    async def default_restore_model(self) -> str:
        present = [name for name in self._restore_models if self._store.find(name) is not None]
        return (present or list(self._restore_models))[0]

    async def background_engine(self, scale: int) -> BackgroundEngine | None:
        return self._background_upscaler().engine_for(scale)

    async def upscale_tile(self, tile: TileToUpscale) -> UpscaledTile:
        upscaler = self._background_upscaler()
        return await _run_one(upscaler.upscale, tile, upscaler.admit, "BackgroundUpscaler")

    def restore_template(self, model: str) -> str:
        self._restorer(model)  # refuses a model this backend does not run
        return restore_template(self._store.manifest, model)

    async def segment_portrait(self, image: np.ndarray, matting: Matting) -> LowResMatte:
        request = MatteRequest(image, matting)
        return await _run_one(self._matter.segment_batch, request, self._matter.admit, "PortraitMatter")

    async def stylize_head(self, job: StyleJob) -> Stylized:
        head = self._cartoonizer("head")
        return await _run_one(head.stylize, job, head.admit, CARTOON_DEPLOYMENTS["head"])

    async def stylize_background(self, job: StyleJob) -> Stylized:
        background = self._cartoonizer("background")
        return await _run_one(background.stylize, job, background.admit, CARTOON_DEPLOYMENTS["background"])

    async def default_colorize_model(self) -> str:
        return self._colorization().default_model()

    async def colorize(self, job: ColorizeJob) -> PredictedColor:
        colorizer = self._colorization()
        (outcome,) = await run_stage(run_per_item, colorizer.predict, [job], colorizer.admit, "Colorizer")
        return unwrap(outcome)

    def matte_engine(self, matting: Matting) -> EngineInfo:
        return self._matte_engines[matting]

    async def health(self) -> dict[str, dict[str, Any]]:
        restorers = {name: engine.info.to_json() for name, engine in self._restorers.items()}
        return {"LocalBackend": {"status": "ok", "restorers": restorers}}

    def observe_job(self, task: str, outcome: str, engine: str, bytes_in: int, bytes_out: int) -> None:
        logger.debug("%s %s on %s: %d bytes in, %d out", task, outcome, engine, bytes_in, bytes_out)

    def _cartoonizer(self, kind: ModelKind) -> CartoonPredictor:
        if kind not in self._cartoonizers:
            self._cartoonizers[kind] = CartoonPredictor(kind, cartoon_styles(self._store.manifest), self._store)
        return self._cartoonizers[kind]

    def _colorization(self) -> ColorizationPredictor:
        if self._colorizer is None:
            self._colorizer = ColorizationPredictor(self._store)
        return self._colorizer

    def _background_upscaler(self) -> UpscalePredictor:
        if self._upscaler is None:
            self._upscaler = UpscalePredictor(self._store, self._upscaler_options)
        return self._upscaler

    def _restorer(self, model: str) -> RestorationPredictor:
        if model not in self._restore_models:
            raise InvalidParameter(f"model {model!r} is not loaded here; available: {list(self._restore_models)}")
        if model not in self._restorers:
            self._restorers[model] = RestorationPredictor(model, self._store)
        return self._restorers[model]


async def _run_one(
    run_batch: Callable[[list[Any]], Sequence[Any]], item: Any, admit: Callable[[Any], None], stage: str
) -> Any:
    """One item through the same admission and error typing as a batched deployment method (``run_stage``: in a
    worker thread, within the job's deadline)."""
    (outcome,) = await run_stage(run_per_item, run_batch, [item], admit, stage)
    return unwrap(outcome)
