"""MODNet: the official inference geometry, strict weight mapping, the port against onnxruntime on the official
file, and batching in the matter (mixed modes and sizes, each answer equal to its own single run)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from deployments.common.errors import InternalError, InvalidParameter, ModelUnavailable
from deployments.common.onnx_graph import read_onnx
from deployments.idphoto.matte import PhotoToMatte
from deployments.idphoto.modnet import ModNet, load_modnet, map_onnx_weights, prepare_input, reference_size
from deployments.idphoto.params import parse_params

MAX_DIFF_VS_ONNXRUNTIME = 1e-4


@pytest.fixture(scope="module")
def modnet_path(model_store):
    return model_store.resolve("modnet")


@pytest.mark.parametrize(
    ("height_width", "expected"),
    [
        ((4000, 3000), (672, 512)),  # 12 MP portrait: short side to 512, long side floored to a multiple of 32
        ((3000, 4000), (512, 672)),
        ((512, 512), (512, 512)),
        ((400, 700), (384, 672)),  # short side below 512, long above: kept, floored (MODNet's demo rule)
        ((300, 200), (768, 512)),  # smaller than 512 both ways: scaled up
        ((100, 9000), (32, 2048)),  # past 4:1 the long side is capped
    ],
)
def test_reference_size_follows_the_official_rule(height_width, expected):
    assert reference_size(*height_width) == expected


def test_prepared_input_is_normalised_and_its_affine_maps_points_exactly():
    rgb = np.zeros((4000, 3000, 3), np.uint8)
    rgb[2000:2048, 1000:1048] = 255
    prepared = prepare_input(rgb)
    assert prepared.tensor.shape == (3, 672, 512) and prepared.tensor.dtype == np.float32
    assert prepared.tensor.min() == -1.0 and prepared.tensor.max() == pytest.approx(1.0)
    x, y = prepared.affine @ np.array([1023.5, 2023.5, 1.0])  # the centre of the white square
    assert prepared.tensor[0, int(round(y)), int(round(x))] == pytest.approx(1.0)
    assert prepared.source_shape == (4000, 3000)


def test_every_weight_of_the_official_file_is_mapped_with_its_shape(modnet_path):
    graph = read_onnx(modnet_path)
    state = map_onnx_weights(graph)
    assert set(state) == set(ModNet().state_dict())
    # Dropping any weight the port needs is refused (strict mapping), not silently left at its random init.
    conv = next(name for name in graph.initializers if name.startswith("hr_branch.conv_hr4x.1.layers.0.weight"))
    crippled = dataclasses.replace(graph, initializers={k: v for k, v in graph.initializers.items() if k != conv})
    with pytest.raises(KeyError):
        map_onnx_weights(crippled)


def test_a_file_that_is_not_modnet_is_model_unavailable(tmp_path):
    from tests.unit.common.test_onnx_graph import conv_model

    path = tmp_path / "other.onnx"
    path.write_bytes(conv_model())
    with pytest.raises(ModelUnavailable, match="not the MODNet graph"):
        load_modnet(path)


def test_port_matches_onnxruntime_on_the_official_file(modnet_path, astronaut_rgb):
    onnxruntime = pytest.importorskip("onnxruntime")
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    session = onnxruntime.InferenceSession(str(modnet_path), options, providers=["CPUExecutionProvider"])
    model = load_modnet(modnet_path).to(memory_format=torch.channels_last)
    rng = np.random.default_rng(0)
    inputs = {
        "astronaut": prepare_input(astronaut_rgb).tensor[None],
        "noise batch": rng.uniform(-1.0, 1.0, (2, 3, 320, 256)).astype(np.float32),
    }
    for name, batch in inputs.items():
        expected = session.run(None, {"input": batch})[0]
        with torch.inference_mode():
            ours = model(torch.from_numpy(batch).contiguous(memory_format=torch.channels_last)).numpy()
        assert ours.shape == expected.shape
        assert np.abs(ours - expected).max() <= MAX_DIFF_VS_ONNXRUNTIME, name
    assert expected.std() > 0.01  # a real matte, not a constant


def test_a_mixed_batch_answers_each_request_as_if_alone(matter, astronaut_rgb):
    flipped = np.ascontiguousarray(astronaut_rgb[:, ::-1])
    wide = np.ascontiguousarray(np.concatenate([astronaut_rgb, flipped], axis=1))  # another input size
    requests = [
        PhotoToMatte(astronaut_rgb, "modnet"),
        PhotoToMatte(wide, "modnet"),
        PhotoToMatte(astronaut_rgb, "selfie"),
        PhotoToMatte(flipped, "modnet"),  # same size as the first: one group (one pass on a GPU)
    ]
    batched = matter.segment_batch(requests)
    assert [low.matting for low in batched] == ["modnet", "modnet", "selfie", "modnet"]
    assert batched[1].alpha.shape == reference_size(*wide.shape[:2])
    for request, low in zip(requests, batched):
        alone = matter.segment(request.image, request.matting)
        assert low.source_shape == request.image.shape[:2]
        assert np.abs(low.alpha - alone.alpha).max() < 1e-4
    # The flipped photo's matte is the flipped matte (the batch did not mix images up).
    assert np.abs(batched[3].alpha[:, ::-1] - batched[0].alpha).mean() < 0.01


def test_matting_mode_is_checked_at_the_edge_and_inside():
    with pytest.raises(InvalidParameter, match="matting"):
        parse_params({"matting": "grabcut"})
    assert parse_params({}).matting == "modnet" and parse_params({"matting": "selfie"}).matting == "selfie"


def test_an_unknown_mode_reaching_the_matter_is_our_bug(matter, astronaut_rgb):
    with pytest.raises(InternalError, match="grabcut"):
        matter.segment_batch([PhotoToMatte(astronaut_rgb, "grabcut")])
