"""The ``Backend`` of ``serve_app.backend`` over DeploymentHandles: what the ingress and the bucket runner share.

Each batched call is one item of a deployment's ``@serve.batch`` method, so concurrent requests (and the faces of one
photo, awaited together) share forward passes. Imports no torch: records from the model replicas are torch-free.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import ray
from ray import serve
from ray.exceptions import RayActorError
from ray.serve._private.constants import SERVE_CONTROLLER_NAME, SERVE_NAMESPACE
from ray.serve.exceptions import BackPressureError, DeploymentUnavailableError, ReplicaUnavailableError
from ray.serve.handle import DeploymentHandle

from deployments.common.batching import Progress
from deployments.common.deployment import record_job
from deployments.common.errors import InternalError, Overloaded, StageUnavailable
from deployments.common.stage import StageCall, StageContext
from deployments.common.weights import ModelSpec
from deployments.restore.params import deployed_restorers
from serve_app.auth.caller import caller_id
from serve_app.backend import Backend, OnProgress, not_deployed
from serve_app.health import HealthAggregator, ReplicaCount, ReplicaCounts, replica_counts_of
from serve_app.llm import LLM_DEPLOYMENT, LlmClient, LlmFailure, LlmRoute, language_model
from serve_app.runner.jobs_layout import JobRef

logger = logging.getLogger(__name__)


# The model deployments a job may call, by deployment name, in the order ``build_app`` bound them (the restorers in
# the app's order of preference). Serve swaps each bound deployment for its handle; the ingress and the bucket runner
# get the same mapping, so both triggers batch together.
Stages = Mapping[str, DeploymentHandle]


class ServeReplicaCounts:
    """``ReplicaCounts`` read from the Serve controller, inside a replica. Asking the controller wakes no replica:
    a model scaled to zero stays at zero however often a load balancer polls ``/healthz``."""

    def __init__(self) -> None:
        self._app = serve.get_replica_context().app_name
        self._controller = ray.get_actor(SERVE_CONTROLLER_NAME, namespace=SERVE_NAMESPACE)

    async def __call__(self) -> dict[str, ReplicaCount]:
        return replica_counts_of(await self._controller.get_serve_instance_details.remote(), self._app)


class HandleTransport:
    """Stage calls over DeploymentHandles: a batched call is one item of the deployment's ``@serve.batch`` method of
    that name (routed by the item's multiplexed model id where the call has one), a query goes to
    ``ModelReplica.ask``. ``health`` is the ``HealthAggregator``'s report of every stage
    (``replica_counts`` and ``health_timeout_s``: see there), led by ``reporter``, the deployment asking (it answers,
    so it is ok), with the ``watched`` deployments no job route needs (the bucket runner, when the app has one)."""

    def __init__(
        self,
        stages: Stages,
        *,
        replica_counts: ReplicaCounts | None = None,
        health_timeout_s: float = 2.0,
        reporter: str | None = None,
        watched: Mapping[str, DeploymentHandle] | None = None,
    ) -> None:
        self._stages = dict(stages)
        self._health = HealthAggregator(self._stages, replica_counts=replica_counts, health_timeout_s=health_timeout_s)
        for name, handle in (watched or {}).items():
            self._health.watch(name, handle)
        self._reporter = reporter

    async def send(self, call: StageCall, *args: Any, on_progress: OnProgress | None = None) -> Any:
        try:
            handle = self._stages[call.deployment]
        except KeyError:
            raise not_deployed(call.deployment, self._stages) from None
        if not call.batched:
            return await call_deployment(handle.ask, call.method, *args)
        model_id = call.model_id(args[0])
        routed = handle.options(multiplexed_model_id=model_id) if model_id else handle
        if call.streamed:
            return await stream_deployment(getattr(routed.options(stream=True), call.method), on_progress, *args)
        return await call_deployment(getattr(routed, call.method), *args)

    async def health(self) -> dict[str, dict[str, Any]]:
        own = {self._reporter: {"status": "ok"}} if self._reporter else {}
        return {**own, **await self._health.reports()}

    def observe_job(self, task: str, outcome: str, engine: str, bytes_in: int, bytes_out: int) -> None:
        record_job(task, outcome, engine, bytes_in, bytes_out, key=caller_id())


def handle_backend(
    stages: Stages,
    manifest: Mapping[str, ModelSpec],
    *,
    replica_counts: ReplicaCounts | None = None,
    health_timeout_s: float = 2.0,
    reporter: str | None = None,
    watched: Mapping[str, DeploymentHandle] | None = None,
    llm: LlmClient | None = None,
) -> Backend:
    """The backend over ``stages`` (the rest: ``HandleTransport``); ``llm``: the app's language model."""
    transport = HandleTransport(
        stages, replica_counts=replica_counts, health_timeout_s=health_timeout_s, reporter=reporter, watched=watched
    )
    return Backend(transport, StageContext(manifest, deployed_restorers(manifest, stages)), llm)


def app_language_model(route: LlmRoute | None, handle: DeploymentHandle | None) -> LlmClient | None:
    """The client of the app's language model: the LLM deployment by ``handle``, or ``route``'s endpoint."""
    return language_model(route or LlmRoute(), ServeChatTransport(handle) if handle is not None else None)


class ServeChatTransport:
    """Chat completions by the LLM deployment's handle (``ray.serve.llm``'s ``LLMServer.chat``: a stream whose one item
    is the completion, or an error response). ``request_type``: how a body becomes its ``ChatCompletionRequest``
    (imported from ``ray.serve.llm`` on first use: only GPU hosts with the ``.[llm]`` extra have it)."""

    def __init__(self, handle: DeploymentHandle, request_type: Callable[..., Any] | None = None) -> None:
        self.where = f"the {LLM_DEPLOYMENT} deployment"
        self._handle = handle
        self._request_type = request_type

    async def complete(self, body: Mapping[str, Any], timeout_s: float) -> Mapping[str, Any]:
        if self._request_type is None:
            from ray.serve.llm.openai_api_models import ChatCompletionRequest

            self._request_type = ChatCompletionRequest
        try:
            request = self._request_type(**body)
        except Exception as exc:  # noqa: BLE001 (the request model's own validation, whatever its version raises)
            raise LlmFailure(f"{self.where} takes no such request: {exc}") from None
        stream = self._handle.options(stream=True).chat.remote(request)
        try:
            async for item in stream:
                return _completion(item, self.where)
        except LlmFailure:
            raise
        except Exception as exc:  # noqa: BLE001 (a lost replica, an engine error: the caller falls back)
            raise LlmFailure(f"{self.where} failed: {type(exc).__name__}: {exc}") from None
        finally:  # answered, failed or abandoned at the caller's timeout: the engine stops working on it
            cancel = getattr(stream, "cancel", None)
            if cancel is not None:
                cancel()
        raise LlmFailure(f"{self.where} answered nothing")


def _completion(item: Any, where: str) -> Mapping[str, Any]:
    """The chat completion of the stream's item, as OpenAI's JSON; an error response is an ``LlmFailure``."""
    payload = item.model_dump() if hasattr(item, "model_dump") else item
    if not isinstance(payload, Mapping):  # a streamed chunk list: we never ask for a stream
        raise LlmFailure(f"{where} answered a {type(item).__name__}, not a chat completion")
    if "choices" not in payload:
        error = payload.get("error") or payload
        message = error.get("message", error) if isinstance(error, Mapping) else error
        raise LlmFailure(f"{where} answered an error: {message}")
    return payload


# A replica lost under a call (its node or process died): Serve replaces it, the caller may retry.
RAY_LOST_REPLICA = (RayActorError, DeploymentUnavailableError, ReplicaUnavailableError)


async def call_deployment(method: Any, *args: Any) -> Any:
    """One call to a model deployment; a full queue there becomes our 503 ``Overloaded``, a replica lost under the
    call our 503 ``StageUnavailable`` (both with ``Retry-After``)."""
    with translated_handle_errors():
        return await method.remote(*args)


@contextlib.contextmanager
def translated_handle_errors() -> Iterator[None]:
    """Serve's refusals of a call as our errors: a full queue, a lost replica."""
    try:
        yield
    except BackPressureError as exc:
        raise Overloaded("the service is at capacity; retry in a few seconds", details={"stage": str(exc)}) from exc
    except RAY_LOST_REPLICA as exc:
        raise StageUnavailable(
            "a model replica was lost (node or process died) and is being replaced; retry in a few seconds",
            details={"stage": type(exc).__name__},
        ) from exc


async def stream_deployment(method: Any, on_progress: OnProgress | None, *args: Any) -> Any:
    """``call_deployment`` of a streamed method: its ``Progress`` records to ``on_progress``, its last answer returned
    (leaving early, as a job past its deadline does, cancels the rest of the stream)."""
    answer = None
    with translated_handle_errors():
        async for answer in method.remote(*args):
            if isinstance(answer, Progress):
                if on_progress is not None:
                    on_progress(answer)
    if answer is None or isinstance(answer, Progress):
        raise InternalError("a streamed stage call ended without its outcome")
    return answer


class BucketRunnerClient:
    """The ingress's view of the ``BucketRunner`` deployment: an ``EventSink`` for the webhook route."""

    def __init__(self, runner: DeploymentHandle) -> None:
        self._runner = runner

    async def submit(self, events: list) -> int:
        """A full runner queue is our 503 ``Overloaded`` too: MinIO then keeps the events and redelivers them."""
        return await call_deployment(self._runner.submit, list(events))

    async def enqueue(self, task: str, ref: JobRef) -> None:
        """A ``JobQueue`` for the jobs API: a refusal comes back as a value (its message), raised here as 503."""
        refusal = await call_deployment(self._runner.enqueue_job, task, ref.owner, ref.id)
        if refusal is not None:
            raise Overloaded(refusal, details={"retry_after_s": 5})
