"""The Ray edge of the ingress: a model deployment's full queue becomes our 503 ``Overloaded``; an item's own failure
becomes the caller's own error."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import numpy as np
import pytest
from ray.serve.exceptions import BackPressureError

from deployments.cartoon.types import StyleJob
from deployments.colorize.types import ColorizeJob
from deployments.common.batching import ItemFailure
from deployments.common.errors import InvalidParameter, Overloaded
from deployments.common.weights import load_manifest
from deployments.restore.types import FaceToRestore, TileToUpscale
from serve_app.handles import BucketRunnerClient, HandleBackend, Stages, call_deployment
from tests.conftest import REPO_ROOT


class _FullQueue:
    """A deployment method whose queue is full: awaiting its response raises, as Serve's handles do."""

    def remote(self, *args):
        async def response():
            raise BackPressureError(num_queued_requests=64, max_queued_requests=64)

        return response()


class _Echo:
    def remote(self, *args):
        async def response():
            return args

        return response()


def test_back_pressure_becomes_a_503_overloaded():
    with pytest.raises(Overloaded) as info:
        asyncio.run(call_deployment(_FullQueue(), "image"))
    assert info.value.http_status == 503 and info.value.code == "overloaded"


def test_answers_pass_through():
    assert asyncio.run(call_deployment(_Echo(), 1, 2)) == (1, 2)


class _Runner:
    submit = _FullQueue()


def test_a_full_bucket_runner_queue_is_a_503_overloaded_too():
    with pytest.raises(Overloaded):
        asyncio.run(BucketRunnerClient(_Runner()).submit([]))


class _Answers:
    """A batched deployment method answering ``outcome`` for this caller's item."""

    def __init__(self, outcome) -> None:
        self.outcome = outcome

    def remote(self, *args):
        async def response():
            return self.outcome

        return response()


def _backend_whose_stages_answer(outcome) -> HandleBackend:
    def stage(name: str, **methods) -> SimpleNamespace:
        return SimpleNamespace(deployment_name=name, **methods)

    stages = Stages(
        stage("FaceAnalyzer", analyze=_Answers(outcome)),
        stage("PortraitMatter", segment=_Answers(outcome)),
        {"gpen-bfr-256": stage("FaceRestorer256", restore=_Answers(outcome))},
        stage("CartoonHead", stylize=_Answers(outcome)),
        stage("CartoonBackground", stylize=_Answers(outcome)),
        stage("BackgroundUpscaler", upscale=_Answers(outcome)),
        stage("Colorizer", colorize=_Answers(outcome)),
    )
    return HandleBackend(stages, load_manifest(REPO_ROOT / "configs" / "models.yaml"))


def test_an_items_failure_is_raised_as_the_callers_own_typed_error():
    """#21 row 20: a batched method answers one outcome per item; the caller re-raises its item's error (a 4xx for
    its own photo), while its batch neighbours got their results."""
    backend = _backend_whose_stages_answer(ItemFailure(InvalidParameter("face analysis input: 1x1 is smaller")))
    image = np.zeros((1, 1, 3), np.uint8)
    calls = [
        backend.analyze_faces(image),
        backend.segment_portrait(image, "selfie"),
        backend.restore_face(FaceToRestore(image), "gpen-bfr-256"),
        backend.upscale_tile(TileToUpscale(image, 2)),
        backend.stylize_head(StyleJob("anime", image)),
        backend.stylize_background(StyleJob("anime", image)),
        backend.colorize(ColorizeJob(np.zeros((3, 32, 32), np.float32), "ddcolor_modelscope")),
    ]
    for call in calls:
        with pytest.raises(InvalidParameter, match="1x1 is smaller"):
            asyncio.run(call)
    assert asyncio.run(_backend_whose_stages_answer([]).analyze_faces(image)) == []
