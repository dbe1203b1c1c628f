"""GFPGAN v1.3 / v1.4 blind face restoration (Wang et al., CVPR 2021), in pure PyTorch.

Computes the same function as ``GFPGANv1Clean`` in TencentARC/GFPGAN ``gfpgan/archs/gfpganv1_clean_arch.py`` (with
``stylegan2_clean_arch.py``) built and called as the official inference helper ``GFPGANer`` does for the released
``GFPGANv1.3.pth`` / ``GFPGANv1.4.pth``: ``out_size=512, num_style_feat=512, channel_multiplier=2, num_mlp=8,
narrow=1, input_is_latent=True, different_w=True, sft_half=True``, forward with ``return_rgb=False`` and random noise.
Parameter names are the official ones, so the released files load unchanged with a strict ``load_state_dict``.

Architecture in one breath: a U-Net of bilinear residual blocks encodes the face down to 4×4; a linear layer turns
that into one 512-d latent per StyleGAN2 layer (16 at 512 px); on the way back up, the U-Net produces a per-pixel
scale and shift at every resolution, and the StyleGAN2 decoder (the "clean" variant: bilinear resampling, no fused
ops) applies them to half of its channels after each upsampling convolution (spatial feature transform).

Randomness: like the official call, every StyleGAN2 convolution adds fresh Gaussian noise (times a learned strength),
drawn as ``out.new_empty(B, 1, H, W).normal_()`` on the activation's device, 15 draws per forward at 512 px in layer
order (4×4 once, then two per resolution 8 … 512). A run seeded like an official one therefore gives the same image;
pass ``generator=`` to draw from a private generator instead of torch's global one.

Tensors: ``B×3×512×512`` RGB float in [-1, 1] in, the restored faces in the same layout out (not clamped).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from deployments.common.errors import InvalidParameter
from deployments.restore.architecture import Architecture
from deployments.restore.checkpoint import load_strict, read_state_dict
from deployments.restore.stylegan2 import LEAKY_SLOPE, PixelNorm, grouped_conv2d, modulated_weight, stylegan2_channels

logger = logging.getLogger(__name__)

_MIN_SIZE_PX = 8
_MAX_SIZE_PX = 1024
# The official files keep the EMA weights under 'params_ema'; GFPGANer falls back to 'params' when that is absent.
_WRAPPER_KEYS = ("params_ema", "params")


@dataclass(frozen=True)
class GfpganConfig:
    """Hyper-parameters of one GFPGANv1Clean; names are the official ones, defaults those GFPGANer uses for v1.3/v1.4.

    The inference flags that are not dimensions (``input_is_latent``, ``different_w``, ``sft_half``: all True for every
    released clean model) are fixed by this module rather than configurable.
    """

    out_size: int = 512
    num_style_feat: int = 512
    num_mlp: int = 8
    channel_multiplier: int = 2
    narrow: float = 1.0

    def __post_init__(self) -> None:
        size = self.out_size
        if size < _MIN_SIZE_PX or size > _MAX_SIZE_PX or size & (size - 1):
            limits = f"[{_MIN_SIZE_PX}, {_MAX_SIZE_PX}]"
            raise InvalidParameter(f"GFPGAN out_size must be a power of two in {limits}, got {size}")
        if self.num_style_feat < 1 or self.num_mlp < 1 or self.channel_multiplier < 1 or self.narrow <= 0:
            raise InvalidParameter(f"GFPGAN config needs positive dimensions, got {self}")
        for resolution_px in (2**log_res for log_res in range(2, self.log_size + 1)):
            # Half-channel SFT: the U-Net's scale/shift maps must cover exactly half of the decoder's channels.
            decoder, unet = self.decoder_channels(resolution_px), self.unet_channels(resolution_px)
            if unet < 1 or decoder != 2 * unet:
                counts = f"{decoder} decoder and {unet} U-Net channels"
                raise InvalidParameter(f"GFPGAN config gives {counts} at {resolution_px}px (need 2:1): {self}")

    @property
    def log_size(self) -> int:
        return self.out_size.bit_length() - 1

    @property
    def num_latent(self) -> int:
        """Latent vectors the decoder consumes (``different_w``): two per resolution 4 … out_size, minus two."""
        return 2 * self.log_size - 2

    @property
    def num_noise_layers(self) -> int:
        """Noise-injecting convolutions: one at 4×4, two per resolution 8 … out_size."""
        return 2 * (self.log_size - 2) + 1

    def decoder_channels(self, resolution_px: int) -> int:
        return stylegan2_channels(resolution_px, self.channel_multiplier, self.narrow)

    def unet_channels(self, resolution_px: int) -> int:
        return stylegan2_channels(resolution_px, self.channel_multiplier, self.narrow * 0.5)


GFPGAN_VARIANTS: dict[str, GfpganConfig] = {
    "gfpgan-v1.4": GfpganConfig(),
    "gfpgan-v1.3": GfpganConfig(),
}


# --------------------------------------------------------------------------------------------------------------------
# U-Net


def _leaky(x: torch.Tensor) -> torch.Tensor:
    return F.leaky_relu(x, negative_slope=LEAKY_SLOPE)


def _resample(x: torch.Tensor, scale_factor: float) -> torch.Tensor:
    return F.interpolate(x, scale_factor=scale_factor, mode="bilinear", align_corners=False)


class ResampleBlock(nn.Module):
    """Official ``ResBlock``: conv, bilinear resize (×0.5 or ×2), conv, plus a resized 1×1 skip."""

    def __init__(self, in_channels: int, out_channels: int, scale_factor: float) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, in_channels, 3, 1, 1)
        self.conv2 = nn.Conv2d(in_channels, out_channels, 3, 1, 1)
        self.skip = nn.Conv2d(in_channels, out_channels, 1, bias=False)
        self.scale_factor = scale_factor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = _leaky(self.conv2(_resample(_leaky(self.conv1(x)), self.scale_factor)))
        return out + self.skip(_resample(x, self.scale_factor))


def _sft_head(channels: int) -> nn.Sequential:
    """Scale or shift predictor for half-channel SFT: conv, leaky ReLU, conv (channel count kept)."""
    return nn.Sequential(
        nn.Conv2d(channels, channels, 3, 1, 1), nn.LeakyReLU(LEAKY_SLOPE), nn.Conv2d(channels, channels, 3, 1, 1)
    )


# --------------------------------------------------------------------------------------------------------------------
# StyleGAN2 decoder, "clean" variant (plain nn.Linear modulation, weights pre-scaled, bilinear resampling)


class ModulatedConv2d(nn.Module):
    """Per-sample modulated (optionally demodulated) convolution; upsampling is bilinear ×2 before the conv."""

    def __init__(
        self, in_channels: int, out_channels: int, kernel_size: int, style_dim: int, *, demodulate: bool, upsample: bool
    ) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.demodulate = demodulate
        self.upsample = upsample
        self.modulation = nn.Linear(style_dim, in_channels)
        nn.init.kaiming_normal_(self.modulation.weight, nonlinearity="linear")
        nn.init.ones_(self.modulation.bias)
        fan_in = in_channels * kernel_size**2
        self.weight = nn.Parameter(torch.randn(1, out_channels, in_channels, kernel_size, kernel_size) / fan_in**0.5)

    def forward(self, x: torch.Tensor, style: torch.Tensor) -> torch.Tensor:
        weight = modulated_weight(self.weight, self.modulation(style), demodulate=self.demodulate)
        if self.upsample:
            x = _resample(x, 2)
        return grouped_conv2d(x, weight, padding=self.kernel_size // 2)


class StyleConv(nn.Module):
    """Modulated 3×3 conv (×√2), plus freshly drawn noise times a learned strength, plus bias, leaky ReLU."""

    def __init__(self, in_channels: int, out_channels: int, style_dim: int, *, upsample: bool) -> None:
        super().__init__()
        self.modulated_conv = ModulatedConv2d(
            in_channels, out_channels, 3, style_dim, demodulate=True, upsample=upsample
        )
        self.weight = nn.Parameter(torch.zeros(1))  # noise strength
        self.bias = nn.Parameter(torch.zeros(1, out_channels, 1, 1))

    def forward(self, x: torch.Tensor, style: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        out = self.modulated_conv(x, style) * 2**0.5
        # The official draw, call for call: same shape, dtype, device and generator consumption.
        noise = out.new_empty(out.shape[0], 1, out.shape[2], out.shape[3]).normal_(generator=generator)
        return _leaky(out + self.weight * noise + self.bias)


class ToRGB(nn.Module):
    """1×1 modulated conv to RGB plus bias, added to the bilinearly upsampled RGB of the previous resolution."""

    def __init__(self, in_channels: int, style_dim: int) -> None:
        super().__init__()
        self.modulated_conv = ModulatedConv2d(in_channels, 3, 1, style_dim, demodulate=False, upsample=False)
        self.bias = nn.Parameter(torch.zeros(1, 3, 1, 1))

    def forward(self, x: torch.Tensor, style: torch.Tensor, skip: torch.Tensor | None) -> torch.Tensor:
        out = self.modulated_conv(x, style) + self.bias
        return out if skip is None else out + _resample(skip, 2)


class ConstantInput(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(1, channels, 4, 4))

    def forward(self, batch: int) -> torch.Tensor:
        return self.weight.repeat(batch, 1, 1, 1)


class SftStyleDecoder(nn.Module):
    """Official ``StyleGAN2GeneratorCSFT`` with ``input_is_latent=True`` and ``sft_half=True``.

    ``style_mlp`` (the mapping network) and the stored ``noises`` are part of the released files but unused here: the
    encoder already produces latents, and the official call draws fresh noise. They are kept for strict loading.
    """

    def __init__(self, config: GfpganConfig) -> None:
        super().__init__()
        dim = config.num_style_feat
        mlp: list[nn.Module] = [PixelNorm()]
        for _ in range(config.num_mlp):
            linear = nn.Linear(dim, dim)
            nn.init.kaiming_normal_(linear.weight, a=LEAKY_SLOPE, nonlinearity="leaky_relu")
            nn.init.zeros_(linear.bias)
            mlp += [linear, nn.LeakyReLU(LEAKY_SLOPE)]
        self.style_mlp = nn.Sequential(*mlp)
        ch = config.decoder_channels
        self.constant_input = ConstantInput(ch(4))
        self.style_conv1 = StyleConv(ch(4), ch(4), dim, upsample=False)
        self.to_rgb1 = ToRGB(ch(4), dim)
        self.style_convs = nn.ModuleList()
        self.to_rgbs = nn.ModuleList()
        self.noises = nn.Module()
        for layer in range(config.num_noise_layers):
            resolution = 2 ** ((layer + 5) // 2)
            self.noises.register_buffer(f"noise{layer}", torch.randn(1, 1, resolution, resolution))
        in_channels = ch(4)
        for log_res in range(3, config.log_size + 1):
            out_channels = ch(2**log_res)
            self.style_convs.append(StyleConv(in_channels, out_channels, dim, upsample=True))
            self.style_convs.append(StyleConv(out_channels, out_channels, dim, upsample=False))
            self.to_rgbs.append(ToRGB(out_channels, dim))
            in_channels = out_channels

    def forward(
        self,
        latent: torch.Tensor,
        conditions: list[tuple[torch.Tensor, torch.Tensor]],
        generator: torch.Generator | None,
    ) -> torch.Tensor:
        """``latent``: B×num_latent×dim; ``conditions``: (scale, shift) per resolution 8 … out_size."""
        out = self.style_conv1(self.constant_input(latent.shape[0]), latent[:, 0], generator)
        skip = self.to_rgb1(out, latent[:, 1], None)
        for block, (scale, shift) in enumerate(conditions):
            i = 2 * block + 1
            out = self.style_convs[2 * block](out, latent[:, i], generator)
            kept, modulated = torch.split(out, out.shape[1] // 2, dim=1)
            out = torch.cat([kept, modulated * scale + shift], dim=1)
            out = self.style_convs[2 * block + 1](out, latent[:, i + 1], generator)
            skip = self.to_rgbs[block](out, latent[:, i + 2], skip)
        return skip


# --------------------------------------------------------------------------------------------------------------------
# The whole generator


class GfpganGenerator(nn.Module):
    """GFPGANv1Clean: U-Net encoder/decoder (``conv_body_*``, ``condition_*``), ``final_linear``, ``stylegan_decoder``.

    ``toRGB`` (the U-Net's intermediate RGB heads, a training-time loss) is in the released files but unused by the
    official inference call (``return_rgb=False``); it is kept for strict loading.
    """

    def __init__(self, config: GfpganConfig) -> None:
        super().__init__()
        self.config = config
        unet = config.unet_channels
        resolutions_up = [2**log_res for log_res in range(3, config.log_size + 1)]
        # Registration order is the official one: it fixes the order of state_dict() keys.
        self.conv_body_first = nn.Conv2d(3, unet(config.out_size), 1)
        self.conv_body_down = nn.ModuleList(
            ResampleBlock(unet(resolution), unet(resolution // 2), 0.5) for resolution in reversed(resolutions_up)
        )
        self.final_conv = nn.Conv2d(unet(4), unet(4), 3, 1, 1)
        self.conv_body_up = nn.ModuleList(
            ResampleBlock(unet(resolution // 2), unet(resolution), 2) for resolution in resolutions_up
        )
        self.toRGB = nn.ModuleList(nn.Conv2d(unet(resolution), 3, 1) for resolution in resolutions_up)
        self.final_linear = nn.Linear(unet(4) * 4 * 4, config.num_latent * config.num_style_feat)
        self.stylegan_decoder = SftStyleDecoder(config)
        self.condition_scale = nn.ModuleList(_sft_head(unet(resolution)) for resolution in resolutions_up)
        self.condition_shift = nn.ModuleList(_sft_head(unet(resolution)) for resolution in resolutions_up)

    def forward(self, x: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """Restore faces: B×3×S×S RGB in [-1, 1] → the same shape, not clamped (the official ``output[0]``).

        Noise comes from ``generator`` if given, else from torch's global generator of ``x``'s device, as officially.
        """
        size = self.config.out_size
        if x.ndim != 4 or x.shape[0] < 1 or x.shape[1] != 3 or x.shape[2] != size or x.shape[3] != size:
            raise InvalidParameter(f"GFPGAN-{size} expects B×3×{size}×{size} input with B ≥ 1, got {tuple(x.shape)}")
        feat = _leaky(self.conv_body_first(x))
        skips = []
        for block in self.conv_body_down:
            feat = block(feat)
            skips.append(feat)
        feat = _leaky(self.final_conv(feat))
        latent = self.final_linear(feat.reshape(x.shape[0], -1)).view(x.shape[0], -1, self.config.num_style_feat)
        conditions = []
        for skip, block, scale, shift in zip(
            reversed(skips), self.conv_body_up, self.condition_scale, self.condition_shift
        ):
            feat = block(feat + skip)
            conditions.append((scale(feat), shift(feat)))
        return self.stylegan_decoder(latent, conditions, generator)


# --------------------------------------------------------------------------------------------------------------------
# Building and loading


def build_gfpgan(config: GfpganConfig | None = None) -> GfpganGenerator:
    """A GFPGAN with random weights (the official initialisation scheme; for tests and benchmarks only)."""
    return GfpganGenerator(config or GfpganConfig())


def load_gfpgan(
    checkpoint_path: str | Path,
    map_location: str | torch.device = "cpu",
    *,
    config: GfpganConfig | None = None,
) -> GfpganGenerator:
    """Load a released ``GFPGANv1.3.pth`` / ``GFPGANv1.4.pth`` strictly, frozen and in eval mode.

    Accepts the official ``{'params_ema': state}`` layout (or ``{'params': state}``) and a flat state dict. Any
    disagreement between file and architecture raises ``ModelUnavailable`` naming the offending keys.
    """
    path = Path(checkpoint_path)
    config = config or GfpganConfig()
    state = read_state_dict(path, map_location, model_name="GFPGAN", wrapper_keys=_WRAPPER_KEYS)
    model = load_strict(
        lambda: build_gfpgan(config),
        state,
        subject=f"GFPGAN checkpoint {path} does not match GFPGAN-{config.out_size} {config}",
    )
    logger.info("loaded GFPGAN-%d from %s (%s)", config.out_size, path, config)
    return model


# How the face restorer runs this family (``architecture.restorer_architecture`` finds it by the module's name).
RESTORER = Architecture(load=load_gfpgan, round_output=True)
