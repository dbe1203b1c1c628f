"""A ``Backend`` that runs the model stages in this process: for tests, the backfill CLI and benchmarks.

The same stages and predictors as the deployments (``serve_app.stages``), each built on first use (a model nobody
asks for costs nothing), its batched methods run one item at a time through the same admission and per-item error
typing, in a worker thread within the job's deadline (``run_in_worker``): no cross-request batching, which is what
Serve adds. Predictors hold one interpreter per thread, so concurrent calls are safe. A restorer without weights runs
the classic restorer, as the deployments do.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from deployments.common.batching import Progress, run_per_item
from deployments.common.errors import InternalError
from deployments.common.stage import Predictor, Stage, StageCall, StageContext
from deployments.common.weights import ModelStore
from deployments.restore.params import RESTORE_MODELS
from deployments.restore.types import BACKGROUND_UPSCALER
from serve_app.backend import Backend, OnProgress, not_deployed
from serve_app.jobs.deadline import current_checkpoint, run_in_worker
from serve_app.llm import LlmClient
from serve_app.stages import bindings, stage_of

logger = logging.getLogger(__name__)

# Real-ESRGAN in this process only for photos up to configs/local.yaml's limit (it costs minutes per megapixel on a
# CPU: docs/BENCHMARKS.md); bigger ones keep Lanczos.
LOCAL_OPTIONS: Mapping[str, Mapping[str, Any]] = {BACKGROUND_UPSCALER: {"max_input_megapixels": 0.25}}


class InProcessTransport:
    """Stage calls to predictors in this process. ``options``: per deployment, its ``user_config`` keys besides the
    batch keys (as a Serve YAML gives them)."""

    def __init__(
        self, store: ModelStore, context: StageContext, options: Mapping[str, Mapping[str, Any]] = LOCAL_OPTIONS
    ) -> None:
        self._store = store
        self._bound = {name: (stage_of(deployment), args) for name, deployment, args in bindings(context)}
        self._options = options
        self._predictors: dict[str, Predictor] = {}

    async def send(self, call: StageCall, *args: Any, on_progress: OnProgress | None = None) -> Any:
        stage, predictor = self._predictor(call.deployment)
        if not stage.reaches(call):
            raise InternalError(f"{call.deployment} offers no {'batched ' if call.batched else ''}{call.method!r}")
        method = getattr(predictor, call.method)
        if not call.batched:
            return method(*args)
        if call.streamed:
            method = functools.partial(method, on_progress=_from_worker(on_progress, current_checkpoint()))
        (outcome,) = await run_in_worker(run_per_item, method, list(args), predictor.admit, call.deployment)
        return outcome

    async def health(self) -> dict[str, dict[str, Any]]:
        loaded = {name: predictor.health() for name, predictor in self._predictors.items()}
        return {"InProcess": {"status": "ok", "stages": loaded}}

    def observe_job(self, task: str, outcome: str, engine: str, bytes_in: int, bytes_out: int) -> None:
        logger.debug("%s %s on %s: %d bytes in, %d out", task, outcome, engine, bytes_in, bytes_out)

    def _predictor(self, deployment: str) -> tuple[Stage, Predictor]:
        if deployment not in self._bound:
            raise not_deployed(deployment, self._bound)
        stage, args = self._bound[deployment]
        if deployment not in self._predictors:
            options = stage.make_options(self._options.get(deployment, {}))
            self._predictors[deployment] = stage.make_predictor(self._store, options, args)
        return stage, self._predictors[deployment]


def _from_worker(on_progress: OnProgress | None, checkpoint: Callable[[], None]) -> Callable[[Any, Progress], None]:
    """A streamed predictor's ``on_progress(item, Progress)``, called in its worker thread: ``on_progress`` told in
    the event loop, and the job's deadline checked between steps (past it, the work stops there)."""
    loop = asyncio.get_running_loop()

    def moved(item: Any, progress: Progress) -> None:
        if on_progress is not None:
            loop.call_soon_threadsafe(on_progress, progress)
        checkpoint()

    return moved


def in_process_backend(
    store: ModelStore,
    *,
    restore_models: Sequence[str] = RESTORE_MODELS,
    options: Mapping[str, Mapping[str, Any]] = LOCAL_OPTIONS,
    llm: LlmClient | None = None,
) -> Backend:
    """Every stage in this process; ``restore_models`` in the order of preference; ``llm``: a language model."""
    context = StageContext(store.manifest, tuple(restore_models))
    return Backend(InProcessTransport(store, context, options), context, llm)
