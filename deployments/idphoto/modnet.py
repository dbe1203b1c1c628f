"""MODNet portrait matting (Ke et al., AAAI 2022): our PyTorch port of the official inference graph.

The official photographic model ships as ONNX (``modnet_photographic_portrait_matting.onnx``). Its graph is the
inference path only (no semantic or detail heads): a MobileNetV2 encoder whose BatchNorms are folded into the
convolutions, then the low-resolution, high-resolution and fusion branches, built from convolution + IBNorm (the first
half of the channels BatchNorm, the rest InstanceNorm) + ReLU. The weights come from the file's initializers
(:mod:`deployments.common.onnx_graph`, no onnx or onnxruntime at run time), mapped strictly: every tensor of the port
is assigned once with its exact shape, every weight of the file is used. The IBNorm BatchNorm halves are folded into
their convolutions at load time. On the official file the matte matches onnxruntime within 1e-4 (tested).

Why a port rather than onnxruntime: one runtime with the other GPU models (torch), bf16 on GPU, and a batch of any
size in one forward pass inside a Ray Serve replica, with no extra dependency.

InstanceNorm makes each image's result depend on its whole canvas, so images are never padded to share a batch:
a batch holds images of one input size (photos of one aspect ratio resize to the same size).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from deployments.common.affine import pixel_scale_affine
from deployments.common.errors import ModelUnavailable
from deployments.common.onnx_graph import OnnxGraph, read_onnx
from deployments.idphoto.matte import MODNET_REFERENCE_PX

logger = logging.getLogger(__name__)

REFERENCE_SIZE_PX = MODNET_REFERENCE_PX
SIDE_MULTIPLE_PX = 32
# Past 4:1 the official rule would feed a very long canvas; such photos are scaled to fit this instead.
MAX_SIDE_PX = 4 * REFERENCE_SIZE_PX
BATCHNORM_EPS = 1e-5
INSTANCENORM_EPS = 1e-5

# MobileNetV2 inverted residual stages: (expansion, out channels, repeats, first stride).
_INVERTED_RESIDUALS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2))
_LAST_STAGE = (6, 320, 1, 1)
_ENCODER_OUT = 1280
_HR = 32  # channels of the high-resolution branch
_BACKBONE_CONVS = 52
# Scale factors of the graph's Resize nodes, in order: the exported graph is the one this port computes.
_RESIZE_SCALES = (2.0, 2.0, 0.5, 0.25, 2.0, 2.0, 2.0, 2.0, 2.0)


class InvertedResidual(nn.Module):
    """MobileNetV2 block with its BatchNorms folded: [1x1 expand, ReLU6], 3x3 depthwise, ReLU6, 1x1 project."""

    def __init__(self, in_channels: int, out_channels: int, stride: int, expansion: int) -> None:
        super().__init__()
        hidden = in_channels * expansion
        convs = [nn.Conv2d(in_channels, hidden, 1)] if expansion != 1 else []
        convs.append(nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden))
        convs.append(nn.Conv2d(hidden, out_channels, 1))
        self.convs = nn.ModuleList(convs)
        self.residual = stride == 1 and in_channels == out_channels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x
        for conv in self.convs[:-1]:
            y = F.relu6(conv(y), inplace=True)
        y = self.convs[-1](y)
        return y.add_(x) if self.residual else y


class Encoder(nn.Module):
    """MobileNetV2 (width 1.0); returns the features at 1/2, 1/4 and 1/32 of the input."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 32, 3, 2, 1)
        blocks: list[InvertedResidual] = []
        channels = 32
        for expansion, out_channels, repeats, stride in (*_INVERTED_RESIDUALS, _LAST_STAGE):
            for index in range(repeats):
                blocks.append(InvertedResidual(channels, out_channels, stride if index == 0 else 1, expansion))
                channels = out_channels
        self.blocks = nn.ModuleList(blocks)
        self.head = nn.Conv2d(channels, _ENCODER_OUT, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x = self.blocks[0](F.relu6(self.stem(x)))
        half = x
        x = self.blocks[2](self.blocks[1](x))
        quarter = x
        for block in self.blocks[3:]:
            x = block(x)
        return half, quarter, F.relu6(self.head(x))

    def convs(self) -> list[nn.Conv2d]:
        """Every convolution in forward order (the order of the exported graph)."""
        return [self.stem, *(conv for block in self.blocks for conv in block.convs), self.head]


class ConvNormRelu(nn.Module):
    """Convolution, then IBNorm (its BatchNorm half folded into the convolution, InstanceNorm on the rest), ReLU."""

    def __init__(
        self, in_channels: int, out_channels: int, kernel: int, stride: int = 1, *, norm: bool = True, relu: bool = True
    ) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel, stride, kernel // 2)
        self.batchnorm_channels = out_channels // 2 if norm else out_channels
        self.relu = relu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        if self.batchnorm_channels < y.shape[1]:
            y = instance_norm_from(y, self.batchnorm_channels)
        return F.relu_(y) if self.relu else y


def instance_norm_from(y: torch.Tensor, start: int) -> torch.Tensor:
    """InstanceNorm (no affine) of channels ``start:`` in place, the others untouched.

    Done as one per-channel scale and shift over the whole tensor: channel slices and ``var_mean`` are slow in the
    channels-last layout the convolutions prefer on CPU, plain means are not. The variance is two-pass (exact).
    """
    mean = y.mean(dim=(2, 3), keepdim=True)
    var = (y - mean).square_().mean(dim=(2, 3), keepdim=True)
    scale = torch.rsqrt(var + INSTANCENORM_EPS)
    shift = -mean * scale
    scale[:, :start] = 1.0
    shift[:, :start] = 0.0
    return y.mul_(scale).add_(shift)


class SqueezeExcite(nn.Module):
    def __init__(self, channels: int, reduction: int = 4) -> None:
        super().__init__()
        self.fc1 = nn.Linear(channels, channels // reduction, bias=False)
        self.fc2 = nn.Linear(channels // reduction, channels, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights = torch.sigmoid(self.fc2(F.relu(self.fc1(x.mean(dim=(2, 3))))))
        return x * weights[:, :, None, None]


def _up2(x: torch.Tensor) -> torch.Tensor:
    return F.interpolate(x, scale_factor=2.0, mode="bilinear", align_corners=False)


def _down(x: torch.Tensor, factor: float) -> torch.Tensor:
    return F.interpolate(x, scale_factor=factor, mode="bilinear", align_corners=False)


class ModNet(nn.Module):
    """The inference path: ``(N, 3, H, W)`` in [-1, 1], sides multiples of 32 → ``(N, 1, H, W)`` matte in [0, 1]."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = Encoder()
        self.se = SqueezeExcite(_ENCODER_OUT)
        # Low-resolution branch: semantics at 1/16 and 1/8.
        self.lr16x = ConvNormRelu(_ENCODER_OUT, 96, 5)
        self.lr8x = ConvNormRelu(96, 32, 5)
        # High-resolution branch: detail at 1/4 and 1/2.
        self.hr_from_half = ConvNormRelu(16, _HR, 1)
        self.hr_half = ConvNormRelu(_HR + 3, _HR, 3, stride=2)
        self.hr_from_quarter = ConvNormRelu(24, _HR, 1)
        self.hr_quarter = ConvNormRelu(2 * _HR, 2 * _HR, 3)
        self.hr4x = nn.Sequential(
            ConvNormRelu(3 * _HR + 3, 2 * _HR, 3), ConvNormRelu(2 * _HR, 2 * _HR, 3), ConvNormRelu(2 * _HR, _HR, 3)
        )
        self.hr2x = nn.Sequential(
            ConvNormRelu(2 * _HR, 2 * _HR, 3),
            ConvNormRelu(2 * _HR, _HR, 3),
            ConvNormRelu(_HR, _HR, 3),
            ConvNormRelu(_HR, _HR, 3),
        )
        # Fusion branch: the matte at full resolution.
        self.fusion4x = ConvNormRelu(32, _HR, 5)
        self.fusion2x = ConvNormRelu(2 * _HR, _HR, 3)
        self.fusion = nn.Sequential(
            ConvNormRelu(_HR + 3, _HR // 2, 3), ConvNormRelu(_HR // 2, 1, 1, norm=False, relu=False)
        )

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        half, quarter, deep = self.encoder(image)
        lr8x = self.lr8x(_up2(self.lr16x(_up2(self.se(deep)))))
        lr4x = _up2(lr8x)
        half = self.hr_from_half(half)
        hr4x = self.hr_half(torch.cat([_down(image, 0.5), half], dim=1))
        hr4x = self.hr_quarter(torch.cat([hr4x, self.hr_from_quarter(quarter)], dim=1))
        hr4x = self.hr4x(torch.cat([hr4x, lr4x, _down(image, 0.25)], dim=1))
        hr2x = self.hr2x(torch.cat([_up2(hr4x), half], dim=1))
        fused = self.fusion2x(torch.cat([_up2(self.fusion4x(lr4x)), hr2x], dim=1))
        return torch.sigmoid(self.fusion(torch.cat([_up2(fused), image], dim=1)))


# ONNX initializer prefix (the official module path) -> our module, for every conv + IBNorm layer of the branches.
BRANCH_LAYERS: dict[str, str] = {
    "lr_branch.conv_lr16x": "lr16x",
    "lr_branch.conv_lr8x": "lr8x",
    "hr_branch.tohr_enc2x": "hr_from_half",
    "hr_branch.conv_enc2x": "hr_half",
    "hr_branch.tohr_enc4x": "hr_from_quarter",
    "hr_branch.conv_enc4x": "hr_quarter",
    **{f"hr_branch.conv_hr4x.{i}": f"hr4x.{i}" for i in range(3)},
    **{f"hr_branch.conv_hr2x.{i}": f"hr2x.{i}" for i in range(4)},
    "f_branch.conv_lr4x": "fusion4x",
    "f_branch.conv_f2x": "fusion2x",
    **{f"f_branch.conv_f.{i}": f"fusion.{i}" for i in range(2)},
}


def load_modnet(path: str | Path) -> ModNet:
    """The port with the official ONNX file's weights; ``ModelUnavailable`` when the file is not that graph."""
    graph = read_onnx(path)
    try:
        state = map_onnx_weights(graph)
        model = ModNet()
        model.load_state_dict(state, strict=True)
    except (KeyError, ValueError, RuntimeError) as exc:
        raise ModelUnavailable(f"{path} is not the MODNet graph this port reads: {exc}") from exc
    return model.eval()


def map_onnx_weights(graph: OnnxGraph) -> dict[str, torch.Tensor]:
    """Our state dict from the exported graph's initializers (BatchNorm halves of IBNorm folded here)."""
    arrays = graph.initializers
    used: set[str] = set()

    def take(name: str) -> np.ndarray:
        used.add(name)
        return np.asarray(arrays[name], dtype=np.float32)

    resizes = graph.initializer_inputs("Resize")
    scales = tuple(float(take(names[-1])[-1]) for names in resizes if names)
    if scales != _RESIZE_SCALES:
        raise ValueError(f"the graph resizes by {scales}, expected {_RESIZE_SCALES}")
    state: dict[str, np.ndarray] = {}
    convs = graph.initializer_inputs("Conv")
    backbone = [names for names in convs if not names[0].startswith(tuple(BRANCH_LAYERS))]
    if len(backbone) != _BACKBONE_CONVS or any(len(names) != 2 for names in backbone):
        raise ValueError(f"{len(backbone)} encoder convolutions with weight and bias, expected {_BACKBONE_CONVS}")
    encoder_convs = [f"encoder.{name}" for name, module in Encoder().named_modules() if isinstance(module, nn.Conv2d)]
    for ours, (weight, bias) in zip(_forward_order(encoder_convs), backbone):
        state[f"{ours}.weight"], state[f"{ours}.bias"] = take(weight), take(bias)
    for prefix, ours in BRANCH_LAYERS.items():
        weight, bias = take(f"{prefix}.layers.0.weight"), take(f"{prefix}.layers.0.bias")
        norm = f"{prefix}.layers.1.bnorm"
        if f"{norm}.weight" in arrays:
            statistics = (take(f"{norm}.{key}") for key in ("weight", "bias", "running_mean", "running_var"))
            weight, bias = _fold_batchnorm(weight, bias, *statistics)
        state[f"{ours}.conv.weight"], state[f"{ours}.conv.bias"] = weight, bias
    (squeeze,), (excite,) = graph.initializer_inputs("MatMul")
    state["se.fc1.weight"], state["se.fc2.weight"] = take(squeeze).T, take(excite).T
    unused = sorted(name for name in set(arrays) - used if np.asarray(arrays[name]).size > 1)
    if unused:
        raise ValueError(f"weights this port does not use: {unused[:8]}")
    expected = ModNet().state_dict()
    for key, value in state.items():
        if key not in expected or tuple(expected[key].shape) != value.shape:
            shape = None if key not in expected else tuple(expected[key].shape)
            raise ValueError(f"{key}: the file has shape {value.shape}, the port expects {shape}")
    return {key: torch.from_numpy(np.ascontiguousarray(value)) for key, value in state.items()}


def _forward_order(encoder_convs: list[str]) -> list[str]:
    """``named_modules`` lists the stem, blocks, head: already the forward order; checked, not assumed."""
    if encoder_convs[0] != "encoder.stem" or encoder_convs[-1] != "encoder.head":
        raise ValueError(f"unexpected encoder layout {encoder_convs[:2]}...{encoder_convs[-1:]}")
    return encoder_convs


def _fold_batchnorm(
    weight: np.ndarray, bias: np.ndarray, gamma: np.ndarray, beta: np.ndarray, mean: np.ndarray, var: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Fold an inference BatchNorm over the first ``len(gamma)`` output channels into the convolution before it."""
    count = gamma.shape[0]
    scale = gamma / np.sqrt(var + BATCHNORM_EPS)
    weight, bias = weight.copy(), bias.copy()
    weight[:count] *= scale[:, None, None, None]
    bias[:count] = (bias[:count] - mean) * scale + beta
    return weight, bias


# --- the official inference geometry ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModNetInput:
    """One photo prepared for the network: the ``(3, H, W)`` float32 tensor in [-1, 1] and ``original -> input``."""

    tensor: np.ndarray
    affine: np.ndarray
    source_shape: tuple[int, int]

    @property
    def size_hw(self) -> tuple[int, int]:
        return self.tensor.shape[1], self.tensor.shape[2]


def reference_size(height: int, width: int, reference_px: int = REFERENCE_SIZE_PX) -> tuple[int, int]:
    """The official input size: short side to ``reference_px`` unless the photo already spans it, sides floored to 32.

    A photo whose short side is at most ``reference_px`` and long side at least ``reference_px`` keeps its size
    (then floored), as in MODNet's demo; sides are at least 32 and at most :data:`MAX_SIDE_PX`.
    """
    if max(height, width) < reference_px or min(height, width) > reference_px:
        if width >= height:
            height_r, width_r = reference_px, int(width / height * reference_px)
        else:
            height_r, width_r = int(height / width * reference_px), reference_px
    else:
        height_r, width_r = height, width
    if max(height_r, width_r) > MAX_SIDE_PX:
        shrink = MAX_SIDE_PX / max(height_r, width_r)
        height_r, width_r = int(height_r * shrink), int(width_r * shrink)
    return (
        max(SIDE_MULTIPLE_PX, height_r - height_r % SIDE_MULTIPLE_PX),
        max(SIDE_MULTIPLE_PX, width_r - width_r % SIDE_MULTIPLE_PX),
    )


def prepare_input(rgb: np.ndarray, reference_px: int = REFERENCE_SIZE_PX) -> ModNetInput:
    """Area-resize to :func:`reference_size` (exact 2x halvings first, OpenCV's fast path), normalise to [-1, 1]."""
    height, width = rgb.shape[:2]
    height_r, width_r = reference_size(height, width, reference_px)
    reduced, factor = rgb, 1
    while reduced.shape[0] >= 4 * height_r and reduced.shape[1] >= 4 * width_r:
        even = reduced[: reduced.shape[0] // 2 * 2, : reduced.shape[1] // 2 * 2]
        reduced = cv2.resize(even, (even.shape[1] // 2, even.shape[0] // 2), interpolation=cv2.INTER_AREA)
        factor *= 2
    # Each halving may drop one edge row or column; the final resize maps the region that was kept.
    kept_h, kept_w = reduced.shape[0] * factor, reduced.shape[1] * factor
    resized = cv2.resize(reduced, (width_r, height_r), interpolation=cv2.INTER_AREA)
    tensor = resized.astype(np.float32).transpose(2, 0, 1) * (2.0 / 255.0) - 1.0
    affine = pixel_scale_affine(width_r / kept_w, height_r / kept_h)
    return ModNetInput(np.ascontiguousarray(tensor), affine, (height, width))
