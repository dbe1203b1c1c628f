"""DCT-Net port on random weights of the official shapes: contract, exactness of the TF-specific pieces, batching."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from deployments.cartoon.dctnet import (
    DctNet,
    TfSameConv2d,
    box_filter,
    build_dctnet_from_constants,
    guided_filter,
    read_guided_filter_eps,
    resize_bilinear_tf_legacy,
)
from deployments.cartoon.graphdef import GraphDef, GraphNode
from deployments.common.errors import InvalidParameter, ModelUnavailable

LAYER_SHAPES = {
    "Conv": (7, 3, 32),
    "Conv_1": (3, 32, 32),
    "Conv_2": (3, 32, 64),
    "Conv_3": (3, 64, 64),
    "Conv_4": (3, 64, 128),
    **{f"block_{i}/{conv}": (3, 128, 128) for i in range(4) for conv in ("conv1", "conv2")},
    "Conv_5": (3, 128, 64),
    "Conv_6": (3, 64, 64),
    "Conv_7": (3, 64, 32),
    "Conv_8": (3, 32, 32),
    "Conv_9": (7, 32, 3),
}
N_PARAMS_OFFICIAL = 1_467_075


def random_constants(seed: int = 0, prefix: str = "") -> dict[str, np.ndarray]:
    """The 36 official weight constants (HWIO kernels), scaled so activations neither vanish nor saturate."""
    rng = np.random.default_rng(seed)
    consts = {}
    for name, (kernel_px, c_in, c_out) in LAYER_SHAPES.items():
        std = 0.7 / np.sqrt(kernel_px * kernel_px * c_in)
        weights = rng.standard_normal((kernel_px, kernel_px, c_in, c_out)) * std
        consts[f"{prefix}generator/{name}/weights"] = weights.astype(np.float32)
        consts[f"{prefix}generator/{name}/biases"] = (rng.standard_normal(c_out) * 0.05).astype(np.float32)
    return consts


@pytest.fixture(scope="module")
def model() -> DctNet:
    return build_dctnet_from_constants(random_constants(), eps=1e-2)


def random_bgr(seed: int, height_px: int = 32, width_px: int = 48) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (height_px, width_px, 3), dtype=np.uint8)


def test_official_parameter_count(model: DctNet) -> None:
    assert sum(p.numel() for p in model.graph.parameters()) == N_PARAMS_OFFICIAL


def test_output_shape_dtype_and_determinism(model: DctNet) -> None:
    image = random_bgr(1)

    first, second = model(image), model(image)

    assert first.shape == image.shape and first.dtype == np.uint8 and first.flags.c_contiguous
    assert np.array_equal(first, second)
    assert first.std() > 1.0  # not a constant image


def test_batch_equals_single_calls_exactly(model: DctNet) -> None:
    images = [random_bgr(seed, 36, 44) for seed in range(3)]
    batch = torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2).float()

    out = model.forward_batch(batch)

    assert out.shape == (3, 3, 36, 44) and out.dtype == torch.uint8
    for index, image in enumerate(images):
        assert np.array_equal(out[index].permute(1, 2, 0).numpy(), model(image))


def test_constant_prefix_does_not_matter(model: DctNet) -> None:
    prefixed = build_dctnet_from_constants(random_constants(prefix="model_anime_head/"), eps=1e-2)

    assert np.array_equal(prefixed(random_bgr(2)), model(random_bgr(2)))


def test_missing_or_misshapen_weights_raise_model_unavailable() -> None:
    consts = random_constants()
    del consts["generator/Conv_7/biases"]
    with pytest.raises(ModelUnavailable, match="Conv_7/biases is missing"):
        build_dctnet_from_constants(consts, eps=1e-2)

    consts = random_constants()
    consts["generator/Conv/weights"] = consts["generator/Conv/weights"][:3]
    with pytest.raises(ModelUnavailable, match="Conv/weights has"):
        build_dctnet_from_constants(consts, eps=1e-2)


@pytest.mark.parametrize("shape", [(30, 32, 3), (32, 34, 3), (0, 32, 3), (32, 32), (32, 32, 4)])
def test_rejects_sizes_that_are_not_multiples_of_4(model: DctNet, shape: tuple[int, ...]) -> None:
    with pytest.raises(InvalidParameter):
        model(np.zeros(shape, dtype=np.uint8))


def test_rejects_wrong_dtypes(model: DctNet) -> None:
    with pytest.raises(InvalidParameter, match="uint8"):
        model(np.zeros((32, 32, 3), dtype=np.float32))
    with pytest.raises(InvalidParameter, match="float32"):
        model.forward_batch(torch.zeros((1, 3, 32, 32), dtype=torch.uint8))
    with pytest.raises(InvalidParameter, match="multiples of 4"):
        model.forward_batch(torch.zeros((1, 3, 32, 30)))


def legacy_resize_numpy(image: np.ndarray, out_h: int, out_w: int) -> np.ndarray:
    """TF legacy bilinear, straight from its definition: src = dst·in/out, neighbours clamped, x then y."""
    in_h, in_w = image.shape
    out = np.empty((out_h, out_w), dtype=np.float64)
    for y in range(out_h):
        src_y = y * in_h / out_h
        y0, wy = int(np.floor(src_y)), src_y - np.floor(src_y)
        y1 = min(y0 + 1, in_h - 1)
        for x in range(out_w):
            src_x = x * in_w / out_w
            x0, wx = int(np.floor(src_x)), src_x - np.floor(src_x)
            x1 = min(x0 + 1, in_w - 1)
            top = image[y0, x0] + (image[y0, x1] - image[y0, x0]) * wx
            bottom = image[y1, x0] + (image[y1, x1] - image[y1, x0]) * wx
            out[y, x] = top + (bottom - top) * wy
    return out


@pytest.mark.parametrize("in_size, out_size", [((5, 7), (10, 14)), ((6, 4), (9, 11)), ((8, 8), (4, 6))])
def test_legacy_bilinear_resize_matches_formula(in_size: tuple[int, int], out_size: tuple[int, int]) -> None:
    image = np.random.default_rng(3).standard_normal(in_size).astype(np.float32)

    got = resize_bilinear_tf_legacy(torch.from_numpy(image)[None, None], *out_size)[0, 0].numpy()

    np.testing.assert_allclose(got, legacy_resize_numpy(image.astype(np.float64), *out_size), rtol=0, atol=1e-5)


def test_legacy_bilinear_doubling_replicates_the_last_row() -> None:
    row = torch.tensor([[[[0.0, 1.0, 2.0]]]])

    assert resize_bilinear_tf_legacy(row, 1, 6).flatten().tolist() == [0.0, 0.5, 1.0, 1.5, 2.0, 2.0]


def guided_filter_numpy(guide: np.ndarray, src: np.ndarray, eps: float) -> np.ndarray:
    """The guided filter with r=1 written directly: 3×3 means over in-image neighbours only."""

    def mean3(a: np.ndarray) -> np.ndarray:
        padded = np.pad(a, ((0, 0), (1, 1), (1, 1)))
        ones = np.pad(np.ones(a.shape[1:]), 1)
        total = sum(padded[:, dy : dy + a.shape[1], dx : dx + a.shape[2]] for dy in range(3) for dx in range(3))
        count = sum(ones[dy : dy + a.shape[1], dx : dx + a.shape[2]] for dy in range(3) for dx in range(3))
        return total / count

    mean_i, mean_p = mean3(guide), mean3(src)
    a = (mean3(guide * src) - mean_i * mean_p) / (mean3(guide * guide) - mean_i**2 + eps)
    b = mean_p - a * mean_i
    return mean3(a) * guide + mean3(b)


def test_guided_filter_matches_direct_numpy() -> None:
    rng = np.random.default_rng(4)
    guide = rng.uniform(-1, 1, (3, 9, 11))
    src = np.tanh(guide * 2 + rng.normal(0, 0.3, guide.shape))

    got = guided_filter(torch.from_numpy(guide[None]).float(), torch.from_numpy(src[None]).float(), eps=1e-2)[0].numpy()

    np.testing.assert_allclose(got, guided_filter_numpy(guide, src, 1e-2), rtol=0, atol=2e-5)


def test_box_filter_is_zero_padded_mean_weights() -> None:
    out = box_filter(torch.ones(1, 2, 4, 5))[0, 0]

    assert out[1, 1].item() == pytest.approx(1.0) and out[0, 0].item() == pytest.approx(4 / 9)


def test_stride_2_conv_pads_bottom_right_like_tf() -> None:
    conv = TfSameConv2d(1, 1, kernel_px=3, stride=2)
    with torch.no_grad():
        conv.weight.fill_(1.0)
    x = torch.arange(36, dtype=torch.float32).reshape(1, 1, 6, 6)

    out = conv(x)[0, 0]

    assert out.shape == (3, 3)
    assert out[0, 0].item() == x[0, 0, 0:3, 0:3].sum().item()  # window starts at (0, 0): no top/left padding
    assert out[2, 2].item() == x[0, 0, 4:6, 4:6].sum().item()  # last window runs into the bottom/right padding


def eps_graph(eps: float, extra_add: bool = False) -> GraphDef:
    value = {"value": np.array(eps, dtype=np.float32)}
    nodes = [
        GraphNode("var", "Sub", ("a", "b"), {}),
        GraphNode("add/y", "Const", (), value),
        GraphNode("add", "AddV2", ("var", "add/y"), {}),
        GraphNode("slope", "RealDiv", ("cov", "add"), {}),
    ]
    if extra_add:
        nodes += [
            GraphNode("add_9/y", "Const", (), value),
            GraphNode("add_9", "AddV2", ("x", "add_9/y"), {}),
            GraphNode("div_9", "RealDiv", ("y", "add_9"), {}),
        ]
    return GraphDef(tuple(nodes))


def test_eps_is_read_from_the_graph() -> None:
    assert read_guided_filter_eps(eps_graph(0.03)) == pytest.approx(0.03)
    with pytest.raises(ModelUnavailable, match="eps"):
        read_guided_filter_eps(eps_graph(0.03, extra_add=True))
