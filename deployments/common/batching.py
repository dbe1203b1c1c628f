"""Per-item outcomes for batched methods: an invalid item, or one that runs out of memory, fails only itself.

``@serve.batch`` hands an exception raised by a batched method to every request of the batch (Ray's batching
contract), so one bad photo would fail its batch neighbours. A batched method therefore never raises for an item:
``run_per_item`` admits each item first (its stage's checks: the image contract, the pixel cap), runs the admitted
ones as one batch, and when that batch raises (an out-of-memory, a bug) runs each half again, down to single items,
so only the items that fail alone fail. Each item gets its result or an :class:`ItemFailure` carrying its typed
error; the caller ``unwrap``s it and raises that error as its own (4xx for the caller's item, 5xx for ours).

Every batched deployment method follows the pattern::

    @serve.batch(...)
    async def restore(self, faces):
        return await asyncio.to_thread(run_per_item, self._engine.restore, faces, self._engine.admit, "FaceRestorer")

Torch-free (the ingress imports ``unwrap``): an out-of-memory is recognised without importing torch.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from deployments.common.errors import InternalError, Overloaded, PortraitError

logger = logging.getLogger(__name__)

ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")

# Allocation failures that torch (CPU) and OpenCV report as plain errors, recognised by their messages.
_OUT_OF_MEMORY_MARKERS = ("can't allocate memory", "Insufficient memory", "out of memory")


@dataclass(frozen=True, eq=False)
class ItemFailure:
    """One item's typed error, returned in place of its result (it pickles across Ray like any record)."""

    error: PortraitError


@dataclass(frozen=True)
class Progress:
    """How far a streamed item is (``StageCall.streamed``): ``done`` of ``total`` steps; its outcome comes last."""

    done: int
    total: int


def unwrap(outcome: ResultT | ItemFailure) -> ResultT:
    """The item's result, or its error raised here, in the caller."""
    if isinstance(outcome, ItemFailure):
        raise outcome.error
    return outcome


def run_per_item(
    run_batch: Callable[[list[ItemT]], Sequence[ResultT]],
    items: Sequence[ItemT],
    admit: Callable[[ItemT], None],
    stage: str,
) -> list[ResultT | ItemFailure]:
    """One outcome per item, in order: ``admit`` (raises a :class:`PortraitError` for an item the stage must not
    run) on each, then ``run_batch`` over the admitted items, halved on failure until each failure stands alone."""
    outcomes: dict[int, ResultT | ItemFailure] = {}
    admitted = []
    for index, item in enumerate(items):
        try:
            admit(item)
        except PortraitError as exc:
            outcomes[index] = ItemFailure(exc)
        else:
            admitted.append(index)
    _run(run_batch, items, admitted, outcomes, stage)
    return [outcomes[index] for index in range(len(items))]


def _run(
    run_batch: Callable[[list[ItemT]], Sequence[ResultT]],
    items: Sequence[ItemT],
    indices: list[int],
    outcomes: dict[int, ResultT | ItemFailure],
    stage: str,
) -> None:
    if not indices:
        return
    try:
        results = run_batch([items[index] for index in indices])
    except Exception as exc:  # isolated below: each item ends with its own result or its own error
        if len(indices) == 1:
            outcomes[indices[0]] = ItemFailure(_item_error(exc, stage))
            return
        logger.warning("%s: a batch of %d failed (%r); running each half again", stage, len(indices), exc)
        if is_out_of_memory(exc):
            _release_cached_memory()
        middle = len(indices) // 2
        _run(run_batch, items, indices[:middle], outcomes, stage)
        _run(run_batch, items, indices[middle:], outcomes, stage)
        return
    if len(results) != len(indices):
        raise InternalError(f"{stage} returned {len(results)} results for {len(indices)} items")
    for index, result in zip(indices, results):
        outcomes[index] = result


def is_out_of_memory(exc: BaseException) -> bool:
    """A failed allocation: ``MemoryError`` (numpy), ``torch.OutOfMemoryError`` (CUDA), or torch's CPU allocator
    and OpenCV reporting one in their messages."""
    if isinstance(exc, MemoryError):
        return True
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(exc, torch.OutOfMemoryError):
        return True
    cv2 = sys.modules.get("cv2")
    reporters = (RuntimeError, cv2.error) if cv2 is not None else (RuntimeError,)
    return isinstance(exc, reporters) and any(marker in str(exc) for marker in _OUT_OF_MEMORY_MARKERS)


def _item_error(exc: Exception, stage: str) -> PortraitError:
    """The typed error one item failed with on its own: ours as it is, an out-of-memory as a retryable 503, anything
    else as a 500 (logged here with its traceback)."""
    if isinstance(exc, PortraitError):
        return exc
    if is_out_of_memory(exc):
        logger.warning("%s ran out of memory on one item alone: %r", stage, exc)
        return Overloaded(
            f"the {stage} stage ran out of memory on this image; retry in a few seconds",
            details={"stage": stage, "reason": "out_of_memory"},
        )
    logger.error("%s failed on one item", stage, exc_info=exc)
    return InternalError(f"the {stage} stage failed on this item ({type(exc).__name__})", details={"stage": stage})


def _release_cached_memory() -> None:
    """After an out-of-memory on a GPU, hand the allocator's cache back before the halves run."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()
