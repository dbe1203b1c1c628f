"""The ConvNeXt encoder of DDColor (Liu et al., CVPR 2022), returning the four normalised stage outputs.

Same function and parameter names as ``ConvNeXt`` in piddnad/DDColor ``basicsr/archs/ddcolor_arch_utils/convnext.py``.
DDColor reads the stage outputs through forward hooks on ``norm0`` … ``norm3``; here the encoder returns them. The
classification ``norm`` (after global pooling) is kept so the released files load strictly, but its output never
reaches DDColor's result, so it is not computed. Every LayerNorm here uses eps 1e-6, the value ConvNeXt was trained
with (PyTorch's default is 1e-5).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

CONVNEXT_EPS = 1e-6


@dataclass(frozen=True)
class ConvNextConfig:
    """Blocks per stage and channels per stage (stride 4, 8, 16, 32)."""

    depths: tuple[int, int, int, int]
    dims: tuple[int, int, int, int]


CONVNEXT_T = ConvNextConfig(depths=(3, 3, 9, 3), dims=(96, 192, 384, 768))
CONVNEXT_L = ConvNextConfig(depths=(3, 3, 27, 3), dims=(192, 384, 768, 1536))


class ChannelsFirstNorm(nn.Module):
    """LayerNorm over the channels of a ``B×C×H×W`` tensor (ConvNeXt's ``data_format="channels_first"``)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(1, keepdim=True)
        var = (x - mean).pow(2).mean(1, keepdim=True)
        x = (x - mean) / torch.sqrt(var + CONVNEXT_EPS)
        return self.weight[:, None, None] * x + self.bias[:, None, None]


class ConvNextBlock(nn.Module):
    """Depthwise 7×7 conv, LayerNorm, 4× MLP, scaled by the learned per-channel ``gamma``, plus the input."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, kernel_size=7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=CONVNEXT_EPS)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.dwconv(x).permute(0, 2, 3, 1)
        y = self.pwconv2(F.gelu(self.pwconv1(self.norm(y))))
        return x + (self.gamma * y).permute(0, 3, 1, 2)


class ConvNeXt(nn.Module):
    """``forward(x)`` → ``[norm0(s0), norm1(s1), norm2(s2), norm3(s3)]``, the stage outputs at stride 4 … 32."""

    def __init__(self, config: ConvNextConfig, in_channels: int = 3) -> None:
        super().__init__()
        dims = config.dims
        stem = nn.Sequential(nn.Conv2d(in_channels, dims[0], kernel_size=4, stride=4), ChannelsFirstNorm(dims[0]))
        self.downsample_layers = nn.ModuleList(
            [stem]
            + [
                nn.Sequential(ChannelsFirstNorm(dims[i]), nn.Conv2d(dims[i], dims[i + 1], kernel_size=2, stride=2))
                for i in range(3)
            ]
        )
        self.stages = nn.ModuleList(
            nn.Sequential(*(ConvNextBlock(dim) for _ in range(depth))) for depth, dim in zip(config.depths, dims)
        )
        for i, dim in enumerate(dims):
            self.add_module(f"norm{i}", ChannelsFirstNorm(dim))
        self.norm = nn.LayerNorm(dims[-1], eps=CONVNEXT_EPS)  # the classifier's norm: loaded, never applied

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        features = []
        for i, (down, stage) in enumerate(zip(self.downsample_layers, self.stages)):
            x = stage(down(x))
            features.append(getattr(self, f"norm{i}")(x))
        return features
