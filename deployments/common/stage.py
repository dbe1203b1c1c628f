"""Model stages, declared once: what a stage's deployment is (``Stage``) and what may be asked of it (``StageCall``).

A model stage is one Serve deployment holding one predictor (the pure model code of its folder). Its ``deployment.py``
states the ``Stage`` once (name, batch defaults, options, predictor factory, the predictor methods callers may reach)
and keeps only its ``@serve.batch`` methods; ``deployments.common.replica.ModelReplica`` is the rest of the skeleton.
Callers never name a deployment or a method by hand: each call is a typed ``StageCall`` declared beside the records it
carries (``ANALYZE_FACES: StageCall[np.ndarray, list[Face]]`` in ``faces/types.py``), and a backend runs it with
``await backend.call(ANALYZE_FACES, image)`` over handles (Serve) or in this process (tests, the CLI): the transport
changes, the call does not.

No Ray and no torch here: the ingress imports the calls.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from deployments.common.errors import InvalidParameter

if TYPE_CHECKING:
    from deployments.common.weights import ModelSpec, ModelStore

ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")


@dataclass(frozen=True)
class StageCall(Generic[ItemT, ResultT]):
    """One thing a caller may ask a stage: ``method`` of the predictor behind ``deployment``. ``batched`` calls take
    one item and join a ``@serve.batch`` with items from other requests; the others (``engine_info``...) are queries
    answered at once, with no item or one argument."""

    deployment: str
    method: str
    batched: bool = True
    # the item's attribute that is its Serve multiplexed model id (the replica holding that model gets it; "" none)
    multiplexed_by: str | None = None
    # a streamed call answers ``Progress`` records while it runs, then its outcome (long work: a render's steps)
    streamed: bool = False

    def model_id(self, item: Any) -> str:
        """The multiplexed model id ``item`` asks for, ``""`` when the call is not multiplexed."""
        return getattr(item, self.multiplexed_by) if self.multiplexed_by else ""

    def at(self, deployment: str) -> StageCall[ItemT, ResultT]:
        """The same call to another binding of the stage (a restorer per model: ``FaceRestorer-gfpgan``...)."""
        return dataclasses.replace(self, deployment=deployment)


class BatchConfig(BaseModel):
    """The batch keys of a deployment's ``user_config``; ``reconfigure`` applies them without a restart."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_batch_size: int = Field(ge=1, le=256)
    batch_wait_timeout_s: float = Field(ge=0.0, le=5.0)


@dataclass(frozen=True)
class StageContext:
    """What decides a stage's bindings: the model manifest and the restorers the app deploys, in preference order."""

    manifest: Mapping[str, ModelSpec]
    restore_models: tuple[str, ...]


class Predictor(Protocol):
    """What a stage's predictor offers the skeleton (besides the methods its ``StageCall``s name)."""

    options: Any

    def admit(self, item: Any) -> None:
        """Raise a ``PortraitError`` for an item this stage must not run (``deployments.common.admission``)."""

    def probe(self) -> None:
        """Serve's periodic health probe: raise when the replica cannot serve."""

    def health(self) -> dict[str, Any]:
        """``status`` (``ok`` or ``degraded``), ``engine`` and ``models`` for ``/healthz``."""


# ``(store, options, *binding args) -> predictor``
PredictorFactory = Callable[..., Predictor]


@dataclass(frozen=True)
class Stage:
    """A model stage as its ``deployment.py`` declares it.

    ``name``: the deployment's name (one binding) or its class's (several: ``bindings``). ``batched``: predictor methods
    reached through ``@serve.batch`` (the deployment defines one of each name); ``streamed``: those of them that
    answer ``Progress`` before their outcome (the deployment's ``@serve.batch`` method is then ``<name>_batch``, an
    async generator, and ``<name>`` streams it: Serve streams a method only when it is itself an async generator
    function, which a ``@serve.batch`` wrapper is not); ``queries``: predictor methods answered at once.
    ``bindings(context)``: deployment name → ``__init__`` arguments, for a stage bound more than once (a restorer per
    model); one binding under ``name`` otherwise. ``options``: the frozen dataclass of the ``user_config``
    keys besides the batch keys (``fixed`` values are not the user's to set).
    """

    name: str
    batch: BatchConfig
    options: type
    predictor: PredictorFactory
    batched: tuple[str, ...]
    queries: tuple[str, ...] = ()
    bindings: Callable[[StageContext], Mapping[str, tuple[Any, ...]]] | None = None
    fixed: Mapping[str, Any] = field(default_factory=dict)
    streamed: tuple[str, ...] = ()

    def batch_method(self, name: str) -> str:
        """The deployment's ``@serve.batch`` method for the batched predictor method ``name``."""
        return f"{name}_batch" if name in self.streamed else name

    def bound(self, context: StageContext) -> Mapping[str, tuple[Any, ...]]:
        return self.bindings(context) if self.bindings is not None else {self.name: ()}

    def make_options(self, values: Mapping[str, Any]) -> Any:
        """The options from ``user_config`` keys, naming the allowed keys when one is unknown."""
        allowed = {option.name for option in dataclasses.fields(self.options)} - set(self.fixed)
        unknown = set(values) - allowed
        if unknown:
            raise InvalidParameter(f"unknown user_config keys {sorted(unknown)}; allowed: {sorted(allowed)}")
        return self.options(**values, **self.fixed)

    def make_predictor(self, store: ModelStore, options: Any, args: Sequence[Any] = ()) -> Predictor:
        return self.predictor(store, options, *args)

    def reaches(self, call: StageCall) -> bool:
        """Whether ``call`` names a method this stage offers, batched or not as declared."""
        if not call.batched:
            return call.method in self.queries
        return call.method in self.batched and call.streamed == (call.method in self.streamed)
