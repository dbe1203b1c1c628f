"""VQGAN layers (Esser et al., CVPR 2021) as CodeFormer's official ``vqgan_arch.py`` defines them: GroupNorm–swish
residual blocks, single-head attention over a feature map, the resampling convolutions, the flat block list whose
indices name the released weights, and the codebook. CodeFormer (:mod:`deployments.restore.codeformer`) lays them
out into its encoder and decoder.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

NORM_GROUPS = 32
_NORM_EPS = 1e-6


def group_norm(channels: int) -> nn.GroupNorm:
    return nn.GroupNorm(NORM_GROUPS, channels, eps=_NORM_EPS)


class ResBlock(nn.Module):
    """GroupNorm–swish–conv twice, plus the input (through a 1×1 conv when the width changes)."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.norm1 = group_norm(in_channels)
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, padding=1)
        self.norm2 = group_norm(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1)
        self.conv_out = nn.Conv2d(in_channels, out_channels, 1) if in_channels != out_channels else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv1(F.silu(self.norm1(x)))
        h = self.conv2(F.silu(self.norm2(h)))
        return h + (x if self.conv_out is None else self.conv_out(x))


class AttnBlock(nn.Module):
    """Single-head self-attention over all pixels of a feature map, added to its input."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.norm = group_norm(channels)
        self.q = nn.Conv2d(channels, channels, 1)
        self.k = nn.Conv2d(channels, channels, 1)
        self.v = nn.Conv2d(channels, channels, 1)
        self.proj_out = nn.Conv2d(channels, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, channels, height, width = x.shape
        h = self.norm(x)
        q, k, v = (conv(h).flatten(2).transpose(1, 2) for conv in (self.q, self.k, self.v))  # B×HW×C
        attended = F.scaled_dot_product_attention(q, k, v)  # scale 1/√C, as the original
        return x + self.proj_out(attended.transpose(1, 2).reshape(batch, channels, height, width))


class Downsample(nn.Module):
    """Stride-2 3×3 conv after padding one pixel on the right and bottom only."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(F.pad(x, (0, 1, 0, 1)))


class Upsample(nn.Module):
    """Nearest-neighbour 2× then a 3×3 conv."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(F.interpolate(x, scale_factor=2.0, mode="nearest"))


class BlockStack(nn.Module):
    """The official ``Encoder``/``Generator``: a flat ``blocks`` list (its indices are part of the key names).

    ``taps`` maps a block index to the resolution whose features are read (encoder) or fused (decoder) after it.
    """

    def __init__(self, blocks: list[nn.Module], taps: dict[int, int]) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(blocks)
        self.taps = taps


class Codebook(nn.Module):
    """The VQGAN codebook (official ``VectorQuantizer``; only its lookup is used at inference)."""

    def __init__(self, codebook_size: int, code_dim: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(codebook_size, code_dim)
