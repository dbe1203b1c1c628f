"""DDColor's pixel decoder: a U-Net of spectrally normalised convolutions and pixel-shuffle upsampling.

Same function and parameter names as ``UnetBlockWide`` and ``CustomPixelShuffle_ICNR`` in piddnad/DDColor
``basicsr/archs/ddcolor_arch_utils/unet.py`` (after fastai/DeOldify), evaluated as the official inference runs them:
in eval mode, so every BatchNorm uses its running statistics and every spectral norm divides by the σ of its *stored*
singular vectors ``weight_u``/``weight_v`` (no power iteration, as ``torch.nn.utils.spectral_norm`` does in eval).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class SpectralConv2d(nn.Module):
    """A conv whose weight is ``weight_orig / σ``, ``σ = u·(W v)`` with the checkpoint's ``u`` and ``v``.

    Parameters and buffers are registered in the order ``torch.nn.utils.spectral_norm`` leaves them (``bias``,
    ``weight_orig``, ``weight_u``, ``weight_v``), so the official ``state_dict()`` order is kept.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, *, bias: bool) -> None:
        super().__init__()
        self.padding = (kernel_size - 1) // 2
        self.bias = nn.Parameter(torch.zeros(out_channels)) if bias else None
        self.weight_orig = nn.Parameter(torch.empty(out_channels, in_channels, kernel_size, kernel_size))
        self.register_buffer("weight_u", torch.empty(out_channels))
        self.register_buffer("weight_v", torch.empty(in_channels * kernel_size * kernel_size))
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """A random weight as ``nn.Conv2d`` draws it, and ``u``/``v`` near its top singular pair (three power
        iterations), so an untrained module divides by a σ of the right size (only loaded files are served)."""
        nn.init.kaiming_uniform_(self.weight_orig, a=5**0.5)
        matrix = self.weight_orig.flatten(1)
        u = F.normalize(torch.randn_like(self.weight_u), dim=0)
        for _ in range(3):
            v = F.normalize(matrix.t() @ u, dim=0)
            u = F.normalize(matrix @ v, dim=0)
        self.weight_u.copy_(u)
        self.weight_v.copy_(v)

    def weight(self) -> torch.Tensor:
        sigma = torch.dot(self.weight_u, torch.mv(self.weight_orig.flatten(1), self.weight_v))
        return self.weight_orig / sigma

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.conv2d(x, self.weight(), self.bias, padding=self.padding)


def _blur(x: torch.Tensor) -> torch.Tensor:
    """Replication-pad one row and column at the top left, then a 2×2 mean: removes pixel-shuffle checkerboards."""
    return F.avg_pool2d(F.pad(x, (1, 0, 1, 0), mode="replicate"), 2, stride=1)


class PixelShuffleUp(nn.Module):
    """1×1 spectral conv to ``out × scale²`` channels (+ BatchNorm when ``batch_norm``), ReLU, pixel shuffle, blur."""

    def __init__(self, in_channels: int, out_channels: int, *, scale: int, batch_norm: bool) -> None:
        super().__init__()
        wide = out_channels * scale * scale
        layers: list[nn.Module] = [SpectralConv2d(in_channels, wide, 1, bias=not batch_norm)]
        if batch_norm:
            layers.append(nn.BatchNorm2d(wide))
        self.conv = nn.Sequential(*layers)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _blur(F.pixel_shuffle(F.relu(self.conv(x)), self.scale))


class UnetBlockWide(nn.Module):
    """Upsample ``up`` 2×, join the batch-normed skip feature, ReLU, then 3×3 spectral conv → ReLU → BatchNorm."""

    def __init__(self, up_channels: int, skip_channels: int, out_channels: int) -> None:
        super().__init__()
        self.shuf = PixelShuffleUp(up_channels, out_channels, scale=2, batch_norm=True)
        self.bn = nn.BatchNorm2d(skip_channels)
        self.conv = nn.Sequential(
            SpectralConv2d(out_channels + skip_channels, out_channels, 3, bias=False),
            nn.ReLU(),
            nn.BatchNorm2d(out_channels),
        )

    def forward(self, up: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
        return self.conv(F.relu(torch.cat([self.shuf(up), self.bn(skip)], dim=1)))
