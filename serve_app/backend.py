"""What a job may await: the ``Backend``, one client over every model stage. No Ray here.

A job asks a stage with a declared call, ``await backend.call(ANALYZE_FACES, image)`` (``deployments.common.stage``);
how the call travels is the ``Transport``'s business: DeploymentHandles in Serve (``serve_app.handles``, so
``@serve.batch`` groups items across requests), the same predictors in this process for tests, the CLI and benchmarks
(``serve_app.local_backend``). Swap the transport, not the client.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from deployments.common.batching import Progress, unwrap
from deployments.common.errors import InvalidParameter
from deployments.common.stage import StageCall, StageContext
from deployments.common.weights import ModelSpec

if TYPE_CHECKING:
    from serve_app.llm import LlmClient

ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")


OnProgress = Callable[[Progress], None]


class Transport(Protocol):
    """How stage calls travel: one outcome per call (an ``ItemFailure`` for a batched item that failed alone); a
    streamed call's ``Progress`` records go to ``on_progress`` meanwhile."""

    async def send(self, call: StageCall, *args: Any, on_progress: OnProgress | None = None) -> Any: ...

    async def health(self) -> dict[str, dict[str, Any]]: ...

    def observe_job(self, task: str, outcome: str, engine: str, bytes_in: int, bytes_out: int) -> None:
        """Count one finished job (``outcome``: ``ok`` or the error code) for the metrics."""


class Backend:
    """The model stages one request may await, and what decides them (``context``: manifest, restorers); ``llm``: the
    app's language model (an OpenAI-compatible endpoint or the LLM deployment, ``serve_app.llm``), or None."""

    def __init__(self, transport: Transport, context: StageContext, llm: LlmClient | None = None) -> None:
        self.transport = transport
        self.context = context
        self.llm = llm

    @property
    def manifest(self) -> Mapping[str, ModelSpec]:
        return self.context.manifest

    @property
    def restore_models(self) -> tuple[str, ...]:
        """The restorers deployed here, in the order of preference (a job without ``model`` gets the first neural)."""
        return self.context.restore_models

    async def call(self, call: StageCall[ItemT, ResultT], *args: Any, on_progress: OnProgress | None = None) -> ResultT:
        """The stage's answer to ``call`` (one item, or a query's arguments); its typed error raised here.
        ``on_progress``: told each ``Progress`` of a streamed call (a render's steps)."""
        return unwrap(await self.transport.send(call, *args, on_progress=on_progress))

    async def health(self) -> dict[str, dict[str, Any]]:
        return await self.transport.health()

    def observe_job(self, task: str, outcome: str, engine: str, bytes_in: int, bytes_out: int) -> None:
        self.transport.observe_job(task, outcome, engine, bytes_in, bytes_out)


def not_deployed(deployment: str, deployed: Mapping[str, Any]) -> InvalidParameter:
    return InvalidParameter(f"{deployment} is not deployed here; deployed: {sorted(deployed)}")
