"""Per-item outcomes (``deployments.common.batching``), the way Ray's own batching tests poison a batch: one bad item
in a batch of 8 fails alone, the seven others get their results."""

from __future__ import annotations

import pickle

import pytest
import torch

from deployments.common.batching import ItemFailure, is_out_of_memory, run_per_item, unwrap
from deployments.common.errors import InternalError, InvalidParameter, NoFaceFound, Overloaded

POISON = 3


def admit_non_negative(item: int) -> None:
    if item < 0:
        raise InvalidParameter(f"item {item} is negative")


def double_all(items: list[int]) -> list[int]:
    return [item * 2 for item in items]


def test_one_invalid_item_in_a_batch_of_8_fails_only_itself():
    calls = []

    def run(items):
        calls.append(list(items))
        return double_all(items)

    items = [0, 1, 2, -1, 4, 5, 6, 7]
    outcomes = run_per_item(run, items, admit_non_negative, "Doubler")
    assert [o for i, o in enumerate(outcomes) if i != 3] == [0, 2, 4, 8, 10, 12, 14]
    assert isinstance(outcomes[3], ItemFailure) and outcomes[3].error.code == "invalid_parameter"
    assert calls == [[0, 1, 2, 4, 5, 6, 7]]  # the admitted seven ran together, once


@pytest.mark.parametrize(
    "out_of_memory",
    [
        lambda: torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 24.00 GiB"),
        lambda: MemoryError("Unable to allocate 25.0 GiB for an array"),
        lambda: RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 26843545600 bytes"),
    ],
    ids=["cuda", "numpy", "torch-cpu"],
)
def test_an_out_of_memory_fails_only_the_item_that_cannot_fit_alone(out_of_memory):
    calls = []

    def run(items):
        calls.append(list(items))
        if POISON in items:
            raise out_of_memory()
        return double_all(items)

    outcomes = run_per_item(run, list(range(8)), admit_non_negative, "Cartoonizer")
    assert [o for i, o in enumerate(outcomes) if i != POISON] == [0, 2, 4, 8, 10, 12, 14]
    error = outcomes[POISON].error
    assert isinstance(error, Overloaded) and error.http_status == 503
    assert error.details == {"stage": "Cartoonizer", "reason": "out_of_memory"}
    # Halved, not one by one: the healthy halves keep their batches.
    assert calls == [[0, 1, 2, 3, 4, 5, 6, 7], [0, 1, 2, 3], [0, 1], [2, 3], [2], [3], [4, 5, 6, 7]]


def test_a_bug_on_one_item_fails_only_that_item_as_our_500(caplog):
    def run(items):
        return [10 // (item - POISON) for item in items]

    outcomes = run_per_item(run, list(range(8)), admit_non_negative, "FaceRestorer")
    assert [o for i, o in enumerate(outcomes) if i != POISON] == [10 // (i - POISON) for i in range(8) if i != POISON]
    error = outcomes[POISON].error
    assert isinstance(error, InternalError) and error.message == (
        "the FaceRestorer stage failed on this item (ZeroDivisionError)"
    )
    assert "ZeroDivisionError" in caplog.text  # logged with its traceback where it happened


def test_a_typed_error_raised_inside_the_batch_stays_that_items_own():
    def run(items):
        if POISON in items:
            raise NoFaceFound("no face in item 3")
        return double_all(items)

    outcomes = run_per_item(run, list(range(8)), admit_non_negative, "FaceAnalyzer")
    assert outcomes[POISON].error.code == "no_face" and outcomes[POISON].error.message == "no face in item 3"
    assert sum(isinstance(o, ItemFailure) for o in outcomes) == 1


def test_every_item_refused_runs_no_batch():
    def run(items):
        raise AssertionError("nothing was admitted, nothing may run")

    outcomes = run_per_item(run, [-1, -2], admit_non_negative, "Doubler")
    assert [o.error.message for o in outcomes] == ["item -1 is negative", "item -2 is negative"]


def test_a_batch_answering_the_wrong_number_of_results_is_our_bug():
    with pytest.raises(InternalError, match="Doubler returned 1 results for 2 items"):
        run_per_item(lambda items: [0], [1, 2], admit_non_negative, "Doubler")


def test_unwrap_returns_a_result_and_raises_a_failure_as_the_callers_own():
    assert unwrap(7) == 7
    failure = ItemFailure(InvalidParameter("face analysis input: 1x1 is smaller than 8 px a side"))
    with pytest.raises(InvalidParameter, match="smaller than 8 px"):
        unwrap(failure)


def test_a_failure_crosses_a_pickle_with_its_code_message_and_details():
    """Ray pickles the outcomes from the replica to the caller."""
    failure = ItemFailure(Overloaded("out of memory", details={"stage": "Cartoonizer", "reason": "out_of_memory"}))
    copy = pickle.loads(pickle.dumps(failure))
    error = copy.error
    assert (type(error), error.code, error.message, error.details) == (
        Overloaded,
        "overloaded",
        "out of memory",
        {"stage": "Cartoonizer", "reason": "out_of_memory"},
    )


def test_out_of_memory_is_told_from_other_errors():
    assert is_out_of_memory(torch.OutOfMemoryError("CUDA out of memory"))
    assert is_out_of_memory(MemoryError())
    assert not is_out_of_memory(RuntimeError("shapes cannot be multiplied"))
    assert not is_out_of_memory(ValueError("can't allocate memory"))  # only allocators' error types count
