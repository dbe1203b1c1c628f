"""MODNet: a random-weight ``.onnx`` in the official export's layout, and the matte on a 12 MP portrait."""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import cv2
import numpy as np
import torch
from torch import nn

from bench.gpu.harness import AMP_DTYPES, LAYOUTS, LOADS, Run, Sweep, astronaut, autocast, precision_table, to_layout
from deployments.idphoto import modnet as modnet_arch
from deployments.idphoto.modnet import ModNet, load_modnet, prepare_input
from tests.tf_graph import field_bytes, field_varint

ID_PHOTO_HW = (4000, 3000)  # a 12 MP phone portrait: MODNet sees it at 672x512
ONNX_FLOAT = 1


def write_modnet_onnx(path: Path, seed: int = 0) -> None:
    """A MODNet ``.onnx`` in the official export's layout, random weights: the backbone's convolutions unnamed in
    forward order (BatchNorm folded), every branch convolution under its module path with IBNorm's BatchNorm half
    beside it, nine Resize nodes with their scales, the squeeze-excite MatMuls. ``load_modnet`` reads it as the
    released file."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = ModNet()
    state = {key: value.numpy() for key, value in model.state_dict().items()}
    initializers: dict[str, np.ndarray] = {}
    nodes: list[tuple[str, tuple[str, ...]]] = []
    encoder_convs = [
        name for name, m in model.named_modules() if name.startswith("encoder") and isinstance(m, nn.Conv2d)
    ]
    for index, name in enumerate(encoder_convs):
        weight, bias = f"{1000 + 2 * index}", f"{1001 + 2 * index}"
        initializers[weight], initializers[bias] = state[f"{name}.weight"], state[f"{name}.bias"]
        nodes.append(("Conv", ("x", weight, bias)))
    for index, scale in enumerate(modnet_arch._RESIZE_SCALES):
        initializers[f"scales.{index}"] = np.array([1.0, 1.0, scale, scale], np.float32)
        nodes.append(("Resize", ("x", "", f"scales.{index}")))
    initializers["se.squeeze"], initializers["se.excite"] = state["se.fc1.weight"].T, state["se.fc2.weight"].T
    nodes += [("MatMul", ("x", "se.squeeze")), ("MatMul", ("x", "se.excite"))]
    for prefix, ours in modnet_arch.BRANCH_LAYERS.items():
        layer = model.get_submodule(ours)
        weight, bias = f"{prefix}.layers.0.weight", f"{prefix}.layers.0.bias"
        initializers[weight], initializers[bias] = state[f"{ours}.conv.weight"], state[f"{ours}.conv.bias"]
        nodes.append(("Conv", ("x", weight, bias)))
        channels = layer.batchnorm_channels
        if channels < layer.conv.out_channels:
            norm = f"{prefix}.layers.1.bnorm"
            initializers[f"{norm}.weight"] = 1.0 + 0.1 * rng.standard_normal(channels, dtype=np.float32)
            initializers[f"{norm}.bias"] = 0.1 * rng.standard_normal(channels, dtype=np.float32)
            initializers[f"{norm}.running_mean"] = 0.1 * rng.standard_normal(channels, dtype=np.float32)
            initializers[f"{norm}.running_var"] = rng.uniform(0.5, 1.5, channels).astype(np.float32)
            statistics_in = tuple(f"{norm}.{k}" for k in ("weight", "bias", "running_mean", "running_var"))
            nodes.append(("BatchNormalization", ("x", *statistics_in)))
    graph = b"".join(
        field_bytes(
            1, b"".join(field_bytes(1, i.encode()) for i in inputs) + field_bytes(2, b"y") + field_bytes(4, op.encode())
        )
        for op, inputs in nodes
    )
    for name, array in initializers.items():
        tensor = b"".join(field_varint(1, dim) for dim in array.shape) + field_varint(2, ONNX_FLOAT)
        tensor += field_bytes(8, name.encode()) + field_bytes(9, np.ascontiguousarray(array, dtype="<f4").tobytes())
        graph += field_bytes(5, tensor)
    path.write_bytes(field_varint(1, 7) + field_bytes(7, graph))


def check_modnet(run: Run, *, share_s: float) -> None:
    """MODNet as the matter runs it on a GPU: a 12 MP portrait prepared at the 512 px reference (672x512 input),
    channels-last; images/s of the network with transfers, plus the CPU-side preparation once."""
    reference_px = 128 if run.quick else modnet_arch.REFERENCE_SIZE_PX
    height, width = ID_PHOTO_HW
    photo = cv2.resize(astronaut(), (width // 10, height // 10) if run.quick else (width, height))
    start = time.perf_counter()
    prepared = prepare_input(photo, reference_px)
    prepare_ms = (time.perf_counter() - start) * 1000
    input_h, input_w = prepared.size_hw

    def first_forward(model: nn.Module) -> None:
        model(torch.zeros(1, 3, input_h, input_w, device=run.device))

    model = LOADS.load(run, "modnet", write_modnet_onnx, load_modnet, first_forward)
    model = model.to(memory_format=torch.channels_last)
    two = torch.from_numpy(np.stack([prepared.tensor, prepared.tensor[:, :, ::-1].copy()])).to(run.device)
    precision_table(
        run,
        "modnet",
        f"MODNet: matte differences on a {input_w}x{input_h} input and its mirror (random official weights)",
        lambda: model(two.contiguous(memory_format=torch.channels_last)),
        to_uint8=_matte_levels,
    )
    official = run.models_dir / "modnet" / "modnet_photographic_portrait_matting.onnx"
    if official.is_file():
        released = load_modnet(official).to(run.device, memory_format=torch.channels_last)
        precision_table(
            run,
            "modnet (released weights)",
            f"MODNet, released weights ({official.name}): the same differences",
            lambda: released(two.contiguous(memory_format=torch.channels_last)),
            to_uint8=_matte_levels,
        )
        del released
    stacked = np.stack([prepared.tensor] * max(run.batches))

    def matte(net: nn.Module, tensors: np.ndarray, precision: str, layout: str) -> np.ndarray:
        batch = torch.from_numpy(tensors).to(run.device).contiguous(memory_format=LAYOUTS[layout])
        with torch.inference_mode(), autocast(run.device, AMP_DTYPES[precision]):
            return net(batch)[:, 0].float().cpu().numpy()

    def make_call(precision: str, layout: str, batch: int) -> Callable[[], object]:
        return partial(matte, to_layout(model, layout), stacked[:batch], precision, layout)

    sweep = Sweep(run, "modnet", "images/s", make_call)
    sweep.measure("NHWC", run.batches, share_s=share_s * 0.85, repeats=1 if run.quick else 5)
    sweep.measure("NCHW", [min(16, max(run.batches))], share_s=share_s * 0.15)
    sweep.report(
        f"MODNet images/s at {input_w}x{input_h} (network and transfers; prepare_input of the "
        f"{photo.shape[1]}x{photo.shape[0]} photo on the CPU took {prepare_ms:.0f} ms, not included)"
    )


def _matte_levels(matte: torch.Tensor) -> np.ndarray:
    return np.round(matte.float().cpu().numpy() * 255.0).astype(np.uint8)
