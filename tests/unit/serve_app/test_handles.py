"""The Ray edge of the ingress: a model deployment's full queue becomes our 503 ``Overloaded``; an item's own failure
becomes the caller's own error."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from ray.serve.exceptions import BackPressureError

from deployments.cartoon.types import STYLIZE_BACKGROUND, STYLIZE_HEAD, ImageToStylize
from deployments.colorize.types import COLORIZE, PhotoToColorize
from deployments.common.batching import ItemFailure, Progress
from deployments.common.errors import InternalError, InvalidParameter, Overloaded
from deployments.common.stage import StageContext
from deployments.common.weights import load_manifest
from deployments.faces.types import ANALYZE_FACES
from deployments.idphoto.matte import SEGMENT_PORTRAIT, PhotoToMatte
from deployments.restore.params import RESTORE_MODELS, restorer_deployment
from deployments.restore.types import RESTORE_FACE, UPSCALE_TILE, FaceToRestore, TileToUpscale
from serve_app.backend import Backend
from serve_app.handles import BucketRunnerClient, call_deployment, handle_backend
from serve_app.stages import bindings
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
    """A deployment method answering ``outcome`` for this caller's item."""

    def __init__(self, outcome) -> None:
        self.outcome = outcome

    def remote(self, *args):
        async def response():
            return self.outcome

        return response()


class _Deployment:
    """A deployment whose every method answers ``outcome``."""

    def __init__(self, name: str, outcome) -> None:
        self.deployment_name = name
        self._outcome = outcome

    def __getattr__(self, method: str) -> _Answers:
        return _Answers(self._outcome)


def _backend_whose_stages_answer(outcome) -> Backend:
    manifest = load_manifest(REPO_ROOT / "configs" / "models.yaml")
    context = StageContext(manifest, RESTORE_MODELS)
    stages = {name: _Deployment(name, outcome) for name, _, _ in bindings(context)}
    return handle_backend(stages, manifest)


def test_an_items_failure_is_raised_as_the_callers_own_typed_error():
    """#21 row 20: a batched method answers one outcome per item; the caller re-raises its item's error (a 4xx for
    its own photo), while its batch neighbours got their results."""
    backend = _backend_whose_stages_answer(ItemFailure(InvalidParameter("face analysis input: 1x1 is smaller")))
    image = np.zeros((1, 1, 3), np.uint8)
    restorer = restorer_deployment(backend.manifest["gpen-bfr-256"])
    calls = [
        backend.call(ANALYZE_FACES, image),
        backend.call(SEGMENT_PORTRAIT, PhotoToMatte(image, "selfie")),
        backend.call(RESTORE_FACE.at(restorer), FaceToRestore(image)),
        backend.call(UPSCALE_TILE, TileToUpscale(image, 2)),
        backend.call(STYLIZE_HEAD, ImageToStylize("anime", image)),
        backend.call(STYLIZE_BACKGROUND, ImageToStylize("anime", image)),
        backend.call(COLORIZE, PhotoToColorize(np.zeros((3, 32, 32), np.float32), "ddcolor_modelscope")),
    ]
    for call in calls:
        with pytest.raises(InvalidParameter, match="1x1 is smaller"):
            asyncio.run(call)
    assert asyncio.run(_backend_whose_stages_answer([]).call(ANALYZE_FACES, image)) == []


def test_a_call_to_a_stage_not_deployed_is_the_callers_mistake():
    backend = _backend_whose_stages_answer([])
    with pytest.raises(InvalidParameter, match="FaceRestorerNowhere is not deployed here"):
        asyncio.run(backend.call(RESTORE_FACE.at("FaceRestorerNowhere"), FaceToRestore(np.zeros((8, 8, 3), np.uint8))))


class _RoutedRenderer:
    """A Renderer handle that records the multiplexed model id each call was routed by; its stream answers two steps
    and then the item."""

    def __init__(self, routed: list[str], model_id: str = "", stream: bool = False) -> None:
        self._routed, self._model_id, self._stream = routed, model_id, stream

    def options(self, *, multiplexed_model_id: str | None = None, stream: bool = False) -> _RoutedRenderer:
        model_id = self._model_id if multiplexed_model_id is None else multiplexed_model_id
        return _RoutedRenderer(self._routed, model_id, self._stream or stream)

    @property
    def render(self) -> _RoutedRenderer:
        self._routed.append(self._model_id)
        return self

    async def remote(self, item):
        assert self._stream  # a render is always streamed
        for done in (1, 2):
            yield Progress(done, 2)
        yield item


def test_a_render_is_routed_by_its_lora_set_and_streams_its_steps_before_its_image():
    from deployments.render.types import RENDER, RENDERER, RenderRequest

    routed: list[str] = []
    backend = handle_backend({RENDERER: _RoutedRenderer(routed)}, load_manifest(REPO_ROOT / "configs" / "models.yaml"))
    styled, plain = RenderRequest("a portrait", loras=(("look-b", 0.5), ("look-a", 1.0))), RenderRequest("a portrait")
    steps: list[Progress] = []
    answers = [asyncio.run(backend.call(RENDER, item, on_progress=steps.append)) for item in (styled, plain)]
    assert answers == [styled, plain]
    assert routed == ["sdxl-base-1.0:look-a,look-b", ""]
    assert steps == [Progress(1, 2), Progress(2, 2)] * 2


class _EndsEarly:
    def options(self, **_):
        return self

    @property
    def render(self):
        return self

    async def remote(self, item):
        yield Progress(1, 30)


def test_a_stream_that_ends_without_its_outcome_is_our_bug():
    from deployments.render.types import RENDER, RENDERER, RenderRequest

    backend = handle_backend({RENDERER: _EndsEarly()}, load_manifest(REPO_ROOT / "configs" / "models.yaml"))
    with pytest.raises(InternalError):
        asyncio.run(backend.call(RENDER, RenderRequest("a portrait")))
