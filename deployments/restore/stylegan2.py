"""StyleGAN2 building blocks (Karras et al., CVPR 2020) as the face restorers' official code defines them.

GPEN (``face_model/op`` and ``gpen_model.py``) uses the original layers: weights stored unscaled and multiplied by
their He constant at run time (equalized learning rate), upsampling by a transposed convolution and an FIR blur.
Their fused CUDA ops are replaced here by the reference definitions (leaky ReLU with bias and gain √2; upfirdn2d as
zero insertion, padding and a depthwise ``conv2d``), so the modules run on any device and trace cleanly. GFPGAN's
"clean" decoder shares :func:`modulated_weight`, :func:`grouped_conv2d`, :class:`PixelNorm` and the channel table.
Parameter names are the official ones: the models that use these blocks load the released files strictly.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

LEAKY_SLOPE = 0.2
DEMOD_EPS = 1e-8
_LEAKY_GAIN = math.sqrt(2.0)


def stylegan2_channels(resolution_px: int, channel_multiplier: int, narrow: float) -> int:
    """Feature channels at one resolution: the official StyleGAN2 ``channels`` table, truncation by ``int`` included.

    GPEN and GFPGAN (decoder, and its U-Net with ``narrow / 2``) all size their layers with this table.
    """
    if resolution_px <= 32:
        return int(512 * narrow)
    base = {64: 256, 128: 128, 256: 64, 512: 32, 1024: 16, 2048: 8}[resolution_px]
    return int(base * channel_multiplier * narrow)


def upfirdn2d(x: torch.Tensor, kernel: torch.Tensor, *, up: int = 1, pad: tuple[int, int] = (0, 0)) -> torch.Tensor:
    """Upsample by zero insertion, pad, and convolve each channel with ``kernel`` (the official op with down=1)."""
    batch, channels, height, width = x.shape
    if up > 1:
        x = x.reshape(batch, channels, height, 1, width, 1)
        x = F.pad(x, [0, up - 1, 0, 0, 0, up - 1])
        x = x.reshape(batch, channels, height * up, width * up)
    x = F.pad(x, [pad[0], pad[1], pad[0], pad[1]])
    taps = torch.flip(kernel, [0, 1]).to(x.dtype)
    weight = taps.expand(channels, 1, *taps.shape)
    return F.conv2d(x, weight, groups=channels)


def _make_kernel(taps: tuple[int, ...], gain: float) -> torch.Tensor:
    """Separable 2-D FIR kernel from 1-D taps, normalised to sum to ``gain``."""
    row = torch.tensor(taps, dtype=torch.float32)
    kernel = row[None, :] * row[:, None]
    kernel /= kernel.sum()
    return kernel * gain


class FirFilter(nn.Module):
    """Anti-aliasing FIR filter (official ``Blur``/``Upsample``); its kernel is a buffer saved in checkpoints."""

    def __init__(self, taps: tuple[int, ...], pad: tuple[int, int], *, up: int = 1, gain: float = 1.0) -> None:
        super().__init__()
        self.register_buffer("kernel", _make_kernel(taps, gain))
        self.pad = pad
        self.up = up

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return upfirdn2d(x, self.kernel, up=self.up, pad=self.pad)


class BiasLeakyReLU(nn.Module):
    """Bias, leaky ReLU (slope 0.2) and gain √2: the official ``FusedLeakyReLU``."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return bias_leaky_relu(x, self.bias)


def bias_leaky_relu(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    bias_shape = (1, -1) + (1,) * (x.ndim - 2)
    return _LEAKY_GAIN * F.leaky_relu(x + bias.view(bias_shape), negative_slope=LEAKY_SLOPE)


class EqualConv2d(nn.Module):
    """Bias-free convolution with the equalized-learning-rate scale applied at run time."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, *, stride: int, padding: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_channels, in_channels, kernel_size, kernel_size))
        self.scale = 1 / math.sqrt(in_channels * kernel_size**2)
        self.stride = stride
        self.padding = padding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.conv2d(x, self.weight * self.scale, stride=self.stride, padding=self.padding)


class EqualLinear(nn.Module):
    """Linear layer with run-time weight scale and learning-rate multiplier ``lr_mul`` (0.01 in the mapping net)."""

    def __init__(
        self, in_dim: int, out_dim: int, *, lr_mul: float = 1.0, bias_init: float = 0.0, activate: bool = False
    ) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_dim, in_dim).div_(lr_mul))
        self.bias = nn.Parameter(torch.full((out_dim,), float(bias_init)))
        self.scale = (1 / math.sqrt(in_dim)) * lr_mul
        self.lr_mul = lr_mul
        self.activate = activate

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.activate:
            return bias_leaky_relu(F.linear(x, self.weight * self.scale), self.bias * self.lr_mul)
        return F.linear(x, self.weight * self.scale, bias=self.bias * self.lr_mul)


class PixelNorm(nn.Module):
    """Normalise each latent vector to unit root-mean-square."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(torch.mean(x**2, dim=1, keepdim=True) + 1e-8)


class ModulatedConv2d(nn.Module):
    """StyleGAN2 convolution whose weight is scaled per sample by the style (and demodulated), run as a grouped conv."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        style_dim: int,
        *,
        blur_taps: tuple[int, ...],
        demodulate: bool = True,
        upsample: bool = False,
    ) -> None:
        super().__init__()
        self.out_channels = out_channels
        self.kernel_size = kernel_size
        self.upsample = upsample
        self.demodulate = demodulate
        if upsample:
            # Transposed stride-2 conv, then a blur whose padding restores exactly 2× the input size.
            slack = (len(blur_taps) - 2) - (kernel_size - 1)
            self.blur = FirFilter(blur_taps, ((slack + 1) // 2 + 1, slack // 2 + 1), gain=4.0)
        self.scale = 1 / math.sqrt(in_channels * kernel_size**2)
        self.padding = kernel_size // 2
        self.weight = nn.Parameter(torch.randn(1, out_channels, in_channels, kernel_size, kernel_size))
        self.modulation = EqualLinear(style_dim, in_channels, bias_init=1.0)

    def forward(self, x: torch.Tensor, style: torch.Tensor) -> torch.Tensor:
        weight = modulated_weight(self.scale * self.weight, self.modulation(style), demodulate=self.demodulate)
        if not self.upsample:
            return grouped_conv2d(x, weight, padding=self.padding)
        batch, in_channels, height, width = x.shape
        k = self.kernel_size
        weight = weight.transpose(1, 2).reshape(batch * in_channels, self.out_channels, k, k)
        out = F.conv_transpose2d(x.reshape(1, batch * in_channels, height, width), weight, stride=2, groups=batch)
        return self.blur(out.reshape(batch, self.out_channels, out.shape[2], out.shape[3]))


def modulated_weight(weight: torch.Tensor, style: torch.Tensor, *, demodulate: bool) -> torch.Tensor:
    """StyleGAN2's per-sample weights: ``weight`` (1×out×in×k×k) times each sample's ``style`` (B×in) over the input
    channels, then, when ``demodulate``, scaled so each output channel's weights have unit norm. B×out×in×k×k."""
    batch, in_channels = style.shape
    weight = weight * style.view(batch, 1, in_channels, 1, 1)
    if demodulate:
        demod = torch.rsqrt(weight.pow(2).sum([2, 3, 4]) + DEMOD_EPS)
        weight = weight * demod.view(batch, weight.shape[1], 1, 1, 1)
    return weight


def grouped_conv2d(x: torch.Tensor, weight: torch.Tensor, *, padding: int) -> torch.Tensor:
    """Each sample of ``x`` (B×in×H×W) convolved with its own weights (B×out×in×k×k), as one grouped convolution."""
    batch, in_channels, height, width = x.shape
    out_channels, k = weight.shape[1], weight.shape[-1]
    weight = weight.reshape(batch * out_channels, in_channels, k, k)
    out = F.conv2d(x.reshape(1, batch * in_channels, height, width), weight, padding=padding, groups=batch)
    return out.reshape(batch, out_channels, out.shape[2], out.shape[3])


class ToRGB(nn.Module):
    """1×1 modulated conv to RGB plus bias, added to the upsampled RGB of the previous resolution."""

    def __init__(self, in_channels: int, style_dim: int, *, blur_taps: tuple[int, ...], upsample: bool = True) -> None:
        super().__init__()
        if upsample:
            slack = len(blur_taps) - 2
            self.upsample = FirFilter(blur_taps, ((slack + 1) // 2 + 1, slack // 2), up=2, gain=4.0)
        self.conv = ModulatedConv2d(in_channels, 3, 1, style_dim, blur_taps=blur_taps, demodulate=False)
        self.bias = nn.Parameter(torch.zeros(1, 3, 1, 1))

    def forward(self, x: torch.Tensor, style: torch.Tensor, skip: torch.Tensor | None = None) -> torch.Tensor:
        out = self.conv(x, style) + self.bias
        if skip is None:
            return out
        return out + self.upsample(skip)


class ConstantInput(nn.Module):
    """The learned 4×4 input of the decoder, repeated over the batch."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.input = nn.Parameter(torch.randn(1, channels, 4, 4))

    def forward(self, batch: int) -> torch.Tensor:
        return self.input.repeat(batch, 1, 1, 1)
