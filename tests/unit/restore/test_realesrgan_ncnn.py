"""RealESRGAN_x4plus converted from the authors' ncnn export: every layer checked before writing, nothing written on
a mismatch, and the converted weights compute what ncnn itself computes from the same files.

The checks run on an ncnn pair written here from a random-weight RrdbNet (the exporter's layout: fp16 weights behind
their tag, fp32 biases); the equality with ncnn runs on the real built-in files (skipped without the ``ncnn`` package).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from deployments.common.errors import ModelUnavailable
from deployments.restore.realesrgan import (
    RrdbConfig,
    RrdbNet,
    load_realesrgan,
    output_to_rgb,
    rgb_to_input,
)
from deployments.restore.realesrgan_ncnn import FP16_TAG, convert_realesrgan_ncnn

LEAKY = ("conv1", "conv2", "conv3", "conv4", "conv_up1", "conv_up2", "conv_hr")


def write_ncnn(model: RrdbNet, folder: Path, *, change: dict[str, str] | None = None) -> tuple[Path, Path]:
    """The ncnn ``.param``/``.bin`` of ``model`` as the authors' export lays it out; ``change`` replaces one
    convolution's parameter string (by module name) to make a file that disagrees with RrdbNet."""
    lines, blobs = [], []
    convs = [(name, m) for name, m in model.named_modules() if isinstance(m, nn.Conv2d)]
    for index, (name, conv) in enumerate(convs):
        params = f"0={conv.out_channels} 1=3 4=1 5=1 6={conv.weight.numel()}"
        if name.rsplit(".", 1)[-1] in LEAKY:
            params += " 9=2 -23310=1,2.000000e-01"
        params = (change or {}).get(name, params)
        lines.append(f"Convolution Conv_{index} 1 1 in{index} out{index} {params}")
        blobs += [
            FP16_TAG.to_bytes(4, "little"),
            conv.weight.detach().numpy().astype("<f2").tobytes(),
            conv.bias.detach().numpy().astype("<f4").tobytes(),
        ]
    lines += [f"Interp Resize_{i} 1 1 a{i} b{i} 0=1 1=2.000000e+00 2=2.000000e+00" for i in range(2)]
    param, weights = folder / "x4.param", folder / "x4.bin"
    param.write_text(f"7767517\n{len(lines)} {len(lines) + 1}\n" + "\n".join(lines) + "\n", encoding="ascii")
    weights.write_bytes(b"".join(blobs))
    return param, weights


@pytest.fixture(scope="module")
def random_x4plus() -> RrdbNet:
    torch.manual_seed(0)
    return RrdbNet(RrdbConfig(scale=4))


def test_conversion_gives_the_networks_weights_rounded_to_fp16(tmp_path, random_x4plus):
    param, weights = write_ncnn(random_x4plus, tmp_path)
    convert_realesrgan_ncnn(param, weights, tmp_path / "x4.pth")
    state = torch.load(tmp_path / "x4.pth", weights_only=True)
    expected = {key: value.half().float() for key, value in random_x4plus.state_dict().items()}
    expected.update({key: value for key, value in random_x4plus.state_dict().items() if key.endswith(".bias")})
    assert sorted(state) == sorted(expected)
    assert all(torch.equal(state[key], expected[key]) for key in expected)
    assert load_realesrgan(tmp_path / "x4.pth").scale == 4


@pytest.mark.parametrize(
    ("layer", "params", "complaint"),
    [
        ("body.3.rdb2.conv5", "0=32 1=3 4=1 5=1 6=18432", "is not RrdbNet's body.3.rdb2.conv5: out 32 (RrdbNet: 64)"),
        ("conv_hr", "0=64 1=3 4=1 5=1 6=36864", "is not RrdbNet's conv_hr: activation 0 (RrdbNet: 2)"),
        ("conv_first", "0=64 1=3 4=0 5=1 6=1728", "is not RrdbNet's conv_first: pad 0 (RrdbNet: 1)"),
        ("conv_last", "0=3 1=3 4=1 5=1 6=1728 9=2 -23310=1,1.000000e-01", "activation 2 (RrdbNet: 0), slope"),
    ],
)
def test_a_layer_that_differs_from_rrdbnet_is_refused_and_nothing_is_written(
    tmp_path, random_x4plus, layer, params, complaint
):
    param, weights = write_ncnn(random_x4plus, tmp_path, change={layer: params})
    with pytest.raises(ModelUnavailable, match=complaint.replace("(", r"\(").replace(")", r"\)")):
        convert_realesrgan_ncnn(param, weights, tmp_path / "x4.pth")
    assert not (tmp_path / "x4.pth").exists()


def test_a_bin_that_is_cut_short_or_too_long_is_refused(tmp_path, random_x4plus):
    param, weights = write_ncnn(random_x4plus, tmp_path)
    whole = weights.read_bytes()
    weights.write_bytes(whole[:-4])
    with pytest.raises(ModelUnavailable, match="shorter than its .param needs"):
        convert_realesrgan_ncnn(param, weights, tmp_path / "x4.pth")
    weights.write_bytes(whole + b"\0" * 8)
    with pytest.raises(ModelUnavailable, match="has 8 bytes after its last layer"):
        convert_realesrgan_ncnn(param, weights, tmp_path / "x4.pth")
    assert not (tmp_path / "x4.pth").exists()


def test_weights_stored_in_another_precision_are_refused(tmp_path, random_x4plus):
    param, weights = write_ncnn(random_x4plus, tmp_path)
    weights.write_bytes(b"\0\0\0\0" + weights.read_bytes()[4:])  # tag 0: raw fp32, not what the release ships
    with pytest.raises(ModelUnavailable, match="weight tag 0x00000000 at byte 0, expected fp16"):
        convert_realesrgan_ncnn(param, weights, tmp_path / "x4.pth")


def test_the_converted_builtin_computes_what_ncnn_computes_from_the_same_files(realesrgan_builtin_store, astronaut_rgb):
    ncnn = pytest.importorskip("ncnn")
    folder = realesrgan_builtin_store / "realesrgan"
    model = load_realesrgan(folder / "RealESRGAN_x4plus-from-ncnn-fp16.pth")
    rgb = np.ascontiguousarray(astronaut_rgb[100:132, 200:232])  # 32x32: an eye and skin, 1 s of CPU
    with torch.no_grad():
        ours = model(rgb_to_input(rgb[None], device=torch.device("cpu")))

    net = ncnn.Net()
    for option in ("use_vulkan_compute", "use_fp16_packed", "use_fp16_storage", "use_fp16_arithmetic"):
        setattr(net.opt, option, False)  # fp32 arithmetic, as PyTorch on a CPU
    net.opt.num_threads = 1
    assert net.load_param(str(folder / "ncnn" / "realesrgan-x4plus.param")) == 0
    assert net.load_model(str(folder / "ncnn" / "realesrgan-x4plus.bin")) == 0
    planar = np.ascontiguousarray(rgb.transpose(2, 0, 1), dtype=np.float32) / 255.0  # kept alive: Mat borrows it
    extractor = net.create_extractor()
    extractor.input("data", ncnn.Mat(planar))
    status, out = extractor.extract("output")
    theirs = torch.from_numpy(np.array(out))[None]

    assert status == 0 and theirs.shape == ours.shape == (1, 3, 128, 128)
    assert float((theirs - ours).abs().max()) < 1e-4  # measured 4.2e-6 (docs/BENCHMARKS.md)
    levels = np.abs(output_to_rgb(theirs).astype(int) - output_to_rgb(ours).astype(int))
    assert levels.max() <= 1 and (levels > 0).mean() < 1e-3
