"""One poisoned item in a batch of 8 fails alone, seven succeed (#21 row 20), for every batched deployment method:
through the predictor's plain batch function as the method runs it (Ray-free), and through the ``@serve.batch``
method itself in a plain event loop, as Ray's own batching tests call it. The poison is an item the stage refuses
(its typed 4xx) or a valid item whose batch runs out of memory (a 503 for it alone)."""

from __future__ import annotations

import ast
import asyncio
import sys
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import cv2
import numpy as np
import pytest
import torch
from ray import serve

from deployments.cartoon.deployment import Cartoonizer
from deployments.cartoon.types import ImageToStylize
from deployments.common.batching import ItemFailure, run_per_item
from deployments.faces.deployment import FaceAnalyzer
from deployments.idphoto.deployment import PortraitMatter
from deployments.idphoto.matte import PhotoToMatte
from deployments.restore.deployment import BackgroundUpscaler, FaceRestorer
from deployments.restore.types import FaceToRestore, TileToUpscale
from deployments.restore.upscaler import UpscalePredictor, UpscalerOptions
from tests.conftest import REPO_ROOT
from tests.unit.restore.test_upscaler import store_with

POISON_AT = 5


@dataclass
class Case:
    make: Callable[[], Any]  # the deployment's class, outside Serve
    method: str  # its batched method, and the predictor's batch function of that name it runs
    good: Callable[[], Any]  # a valid item (a new object per call)
    refused: Any  # an item the stage must refuse
    refused_code: str
    result_ok: Callable[[Any], bool]


@pytest.fixture(scope="module")
def portrait(astronaut_rgb) -> np.ndarray:
    return cv2.resize(astronaut_rgb, (256, 256), interpolation=cv2.INTER_AREA)


@pytest.fixture
def cases(portrait, tmp_path, mediapipe_dir) -> dict[str, Case]:
    def upscaler() -> Any:
        replica = BackgroundUpscaler.func_or_class()
        replica._predictor = UpscalePredictor(store_with(tmp_path, mediapipe_dir, (2,)), UpscalerOptions(device="cpu"))
        return replica

    tile = portrait[:64, :64].copy()
    return {
        "FaceAnalyzer": Case(
            FaceAnalyzer.func_or_class,
            "analyze_batch",
            lambda: portrait.copy(),
            np.zeros((1, 1, 3), np.uint8),  # decodes fine; the detectors need 8 px a side
            "invalid_parameter",
            lambda faces: len(faces) == 1,
        ),
        "PortraitMatter": Case(
            PortraitMatter.func_or_class,
            "segment_batch",
            lambda: PhotoToMatte(portrait.copy(), "selfie"),
            PhotoToMatte(portrait.astype(np.float32), "selfie"),
            "invalid_parameter",
            lambda matte: matte.matting == "selfie" and tuple(matte.source_shape) == (256, 256),
        ),
        "FaceRestorer": Case(
            lambda: FaceRestorer.func_or_class("FaceRestorer256", "gpen-bfr-256"),
            "restore",
            lambda: FaceToRestore(portrait.copy()),
            FaceToRestore(np.zeros((1100, 1100, 3), np.uint8)),  # over the crop cap
            "image_too_many_pixels",
            lambda face: face.crop.shape == (256, 256, 3),
        ),
        "BackgroundUpscaler": Case(
            upscaler,
            "upscale",
            lambda: TileToUpscale(tile.copy(), 2),
            TileToUpscale(np.zeros((600, 600, 3), np.uint8), 2),  # a whole photo, not a tile
            "image_too_many_pixels",
            lambda done: done.pixels.shape == (128, 128, 3),
        ),
        "CartoonBackground": Case(
            lambda: Cartoonizer.func_or_class("CartoonBackground", "background"),
            "stylize",
            lambda: ImageToStylize("anime", tile.copy()),
            ImageToStylize("cubist", tile.copy()),
            "invalid_parameter",
            lambda done: done.image.shape == (64, 64, 3),
        ),
        "CartoonHead": Case(
            lambda: Cartoonizer.func_or_class("CartoonHead", "head"),
            "stylize",
            lambda: ImageToStylize("anime", tile.copy()),
            ImageToStylize("anime", np.zeros((720, 2064, 3), np.uint8)),  # over DCT-Net's input cap
            "image_too_many_pixels",
            lambda done: done.engine.engine in ("none", "dctnet"),
        ),
    }


@pytest.fixture
def outside_serve(monkeypatch) -> list[int]:
    """Lets ``@serve.batch`` run in a plain event loop (its queue only reads ``max_ongoing_requests`` from the
    replica context), and records each batch's size."""
    context = SimpleNamespace(_deployment_config=SimpleNamespace(max_ongoing_requests=64))
    monkeypatch.setattr(serve, "get_replica_context", lambda: context)
    sizes: list[int] = []
    monkeypatch.setattr(sys.modules["deployments.common.deployment"], "record_batch", lambda s, n: sizes.append(n))
    return sizes


def batch_of_eight(case: Case, poison: Any) -> list[Any]:
    return [poison if index == POISON_AT else case.good() for index in range(8)]


def run_plain(replica: Any, case: Case, items: list[Any]) -> list[Any]:
    predictor = replica._predictor
    return run_per_item(getattr(predictor, case.method), items, predictor.admit, case.method)


def run_batched(replica: Any, case: Case, items: list[Any], sizes: list[int]) -> list[Any]:
    """The method's own body under a fresh ``@serve.batch`` of 8 (its decorator's queue belongs to the class and to
    the event loop that first used it, as in a replica process; a fresh one leaves the class as other tests find it).
    """
    batched = serve.batch(max_batch_size=8, batch_wait_timeout_s=1.0)(getattr(type(replica), case.method).__wrapped__)

    async def all_at_once():
        return await asyncio.gather(*(batched(replica, item) for item in items))

    outcomes = asyncio.run(asyncio.wait_for(all_at_once(), 120))
    assert sizes == [8]  # the eight shared one batch (never waiting: they are queued before the batch starts)
    return outcomes


@pytest.fixture
def run_eight(outside_serve) -> Callable[[str, Any, Case, list[Any]], list[Any]]:
    """Runs a batch through the plain batch function (``plain``) or the ``@serve.batch`` method (``serve_batch``)."""

    def run(via: str, replica: Any, case: Case, items: list[Any]) -> list[Any]:
        if via == "plain":
            return run_plain(replica, case, items)
        return run_batched(replica, case, items, outside_serve)

    return run


def assert_seven_succeed(case: Case, outcomes: list[Any], code: str) -> None:
    assert len(outcomes) == 8
    failed = outcomes[POISON_AT]
    assert isinstance(failed, ItemFailure) and failed.error.code == code, failed
    others = [outcome for index, outcome in enumerate(outcomes) if index != POISON_AT]
    assert all(not isinstance(outcome, ItemFailure) and case.result_ok(outcome) for outcome in others), others


STAGES = ["FaceAnalyzer", "PortraitMatter", "FaceRestorer", "BackgroundUpscaler", "CartoonBackground", "CartoonHead"]


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("via", ["plain", "serve_batch"])
def test_an_invalid_item_fails_only_itself_in_a_batch_of_8(stage, via, cases, run_eight):
    case = cases[stage]
    replica = case.make()
    items = batch_of_eight(case, case.refused)
    outcomes = run_eight(via, replica, case, items)
    assert_seven_succeed(case, outcomes, case.refused_code)


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("via", ["plain", "serve_batch"])
def test_an_out_of_memory_fails_only_the_item_that_caused_it(stage, via, cases, run_eight, monkeypatch):
    case = cases[stage]
    replica = case.make()
    poison = case.good()
    batch_function = getattr(replica._predictor, case.method)

    def running_out_of_memory_with_the_poison(items):
        if any(item is poison for item in items):
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 24.50 GiB")
        return batch_function(items)

    monkeypatch.setattr(replica._predictor, case.method, running_out_of_memory_with_the_poison)
    items = batch_of_eight(case, poison)
    outcomes = run_eight(via, replica, case, items)
    assert_seven_succeed(case, outcomes, "overloaded")
    assert outcomes[POISON_AT].error.details["reason"] == "out_of_memory"


def test_every_batched_method_answers_per_item():
    """A deployment added later (the Colorizer...) follows the same pattern: each ``@serve.batch`` method of every
    ``deployment.py`` returns ``ModelReplica.run_batch``'s outcomes (``run_per_item``), or for a streamed method
    (``<name>_batch``) ``stream_batch``'s, so its items fail alone."""
    methods = {}
    for path in sorted((REPO_ROOT / "deployments").glob("*/deployment.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            batched = isinstance(node, ast.AsyncFunctionDef) and any(
                "serve.batch" in ast.unparse(decorator) for decorator in node.decorator_list
            )
            if batched:
                body, streamed = ast.unparse(node), node.name.removesuffix("_batch")
                ran = f"self.run_batch({node.name!r}" in body or f"self.stream_batch({streamed!r}" in body
                methods[f"{path.parent.name}.{node.name}"] = ran
    expected = {"faces.analyze_batch", "idphoto.segment_batch", "restore.restore", "restore.upscale", "cartoon.stylize"}
    assert expected | {"colorize.predict", "render.render_batch"} <= set(methods)
    assert all(methods.values()), methods
