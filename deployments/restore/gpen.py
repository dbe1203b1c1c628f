"""GPEN blind face restoration generator (Yang et al., CVPR 2021), in pure PyTorch.

Computes the same function as ``FullGenerator`` in yangxy/GPEN ``face_model/gpen_model.py`` with the official
``isconcat=True`` setting, and keeps its parameter names so the released ``GPEN-BFR-*.pth`` files load unchanged with
a strict ``load_state_dict``. The StyleGAN2 layers it is built from (fused CUDA ops replaced by their reference
definitions) are in :mod:`deployments.restore.stylegan2`.

Architecture in one breath: an encoder of stride-2 convolutions (``ecd0`` … ``ecdN``) turns the face into feature
maps from ``size`` down to 4×4 and, through ``final_linear`` and the StyleGAN2 mapping network, into one style vector;
the StyleGAN2 decoder (``generator``) takes the encoder's feature maps where StyleGAN2 injects noise and concatenates
them to its own activations, so the forward pass is deterministic.

Weights are stored unscaled and multiplied by their He constant at run time (equalized learning rate), exactly as
the original does, so the checkpoint values stay those of the released files.

Tensors: ``B×3×size×size`` RGB float in [-1, 1] in, the same layout out (not clamped).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from deployments.common.errors import InvalidParameter, ModelUnavailable
from deployments.restore.architecture import Architecture
from deployments.restore.checkpoint import load_strict, read_state_dict
from deployments.restore.stylegan2 import (
    BiasLeakyReLU,
    ConstantInput,
    EqualConv2d,
    EqualLinear,
    FirFilter,
    ModulatedConv2d,
    PixelNorm,
    ToRGB,
    stylegan2_channels,
)

logger = logging.getLogger(__name__)

_MIN_SIZE_PX = 8
_MAX_SIZE_PX = 2048


@dataclass(frozen=True)
class GpenConfig:
    """Hyper-parameters of one GPEN generator; the names and defaults are those of the official ``FullGenerator``."""

    size: int
    style_dim: int = 512
    n_mlp: int = 8
    channel_multiplier: int = 2
    narrow: float = 1.0
    blur_kernel: tuple[int, ...] = (1, 3, 3, 1)
    lr_mlp: float = 0.01

    def __post_init__(self) -> None:
        if self.size < _MIN_SIZE_PX or self.size > _MAX_SIZE_PX or self.size & (self.size - 1):
            raise InvalidParameter(
                f"GPEN size must be a power of two in [{_MIN_SIZE_PX}, {_MAX_SIZE_PX}], got {self.size}"
            )
        if self.style_dim < 1 or self.n_mlp < 1 or self.channel_multiplier < 1 or self.narrow <= 0:
            raise InvalidParameter(f"GPEN config needs positive dimensions, got {self}")
        if self.channels_at(self.size) < 1:
            raise InvalidParameter(f"GPEN config leaves no channels at {self.size} px: {self}")

    @property
    def log_size(self) -> int:
        return self.size.bit_length() - 1

    def channels_at(self, resolution_px: int) -> int:
        return stylegan2_channels(resolution_px, self.channel_multiplier, self.narrow)


GPEN_VARIANTS: dict[str, GpenConfig] = {
    "gpen-bfr-512": GpenConfig(size=512, channel_multiplier=2, narrow=1.0),
    "gpen-bfr-256": GpenConfig(size=256, channel_multiplier=1, narrow=0.5),
}


# --------------------------------------------------------------------------------------------------------------------
# GPEN's own layers: encoder features concatenated where StyleGAN2 adds noise


class FeatureInjection(nn.Module):
    """Concatenate scaled encoder features where StyleGAN2 adds noise (official ``NoiseInjection``, isconcat)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(1))

    def forward(self, x: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        return torch.cat((x, self.weight * features), dim=1)


class StyledConv(nn.Module):
    """Modulated conv, encoder-feature concatenation, then bias + leaky ReLU over the doubled channels."""

    def __init__(
        self, in_channels: int, out_channels: int, style_dim: int, *, blur_taps: tuple[int, ...], upsample: bool = False
    ) -> None:
        super().__init__()
        self.conv = ModulatedConv2d(in_channels, out_channels, 3, style_dim, blur_taps=blur_taps, upsample=upsample)
        self.noise = FeatureInjection()
        self.activate = BiasLeakyReLU(2 * out_channels)

    def forward(self, x: torch.Tensor, style: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        return self.activate(self.noise(self.conv(x, style), features))


class StyleDecoder(nn.Module):
    """StyleGAN2 synthesis network conditioned on encoder features (official ``Generator`` with isconcat)."""

    def __init__(self, config: GpenConfig) -> None:
        super().__init__()
        taps = config.blur_kernel
        ch = config.channels_at
        self.style = nn.Sequential(
            PixelNorm(),
            *(
                EqualLinear(config.style_dim, config.style_dim, lr_mul=config.lr_mlp, activate=True)
                for _ in range(config.n_mlp)
            ),
        )
        self.input = ConstantInput(ch(4))
        self.conv1 = StyledConv(ch(4), ch(4), config.style_dim, blur_taps=taps)
        self.to_rgb1 = ToRGB(2 * ch(4), config.style_dim, blur_taps=taps, upsample=False)
        self.convs = nn.ModuleList()
        self.to_rgbs = nn.ModuleList()
        in_channels = ch(4)
        for log_res in range(3, config.log_size + 1):
            out_channels = ch(2**log_res)
            up_conv = StyledConv(2 * in_channels, out_channels, config.style_dim, blur_taps=taps, upsample=True)
            self.convs.append(up_conv)
            self.convs.append(StyledConv(2 * out_channels, out_channels, config.style_dim, blur_taps=taps))
            self.to_rgbs.append(ToRGB(2 * out_channels, config.style_dim, blur_taps=taps))
            in_channels = out_channels

    def forward(self, code: torch.Tensor, features: list[torch.Tensor]) -> torch.Tensor:
        """``features`` are the encoder maps from 4×4 up to full size; every layer uses the same style ``w``."""
        w = self.style(code)
        out = self.conv1(self.input(code.shape[0]), w, features[0])
        skip = self.to_rgb1(out, w)
        for block, resolution_features in enumerate(features[1:]):
            out = self.convs[2 * block](out, w, resolution_features)
            out = self.convs[2 * block + 1](out, w, resolution_features)
            skip = self.to_rgbs[block](out, w, skip)
        return skip


class EncoderLayer(nn.Sequential):
    """Official ``ConvLayer``: [blur,] conv (bias-free), bias + leaky ReLU; stride 2 when downsampling."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, *, blur_taps: tuple[int, ...]) -> None:
        layers: list[nn.Module] = []
        downsample = kernel_size > 1
        if downsample:
            slack = (len(blur_taps) - 2) + (kernel_size - 1)
            layers.append(FirFilter(blur_taps, ((slack + 1) // 2, slack // 2)))
            layers.append(EqualConv2d(in_channels, out_channels, kernel_size, stride=2, padding=0))
        else:
            layers.append(EqualConv2d(in_channels, out_channels, kernel_size, stride=1, padding=kernel_size // 2))
        layers.append(BiasLeakyReLU(out_channels))
        super().__init__(*layers)


class GpenGenerator(nn.Module):
    """GPEN ``FullGenerator``: encoder ``ecd0..ecd{log2(size)-2}``, ``final_linear``, and the decoder ``generator``.

    Each ``ecdK`` wraps one ``EncoderLayer`` in a ``Sequential`` only so the parameter names match the released files.
    """

    def __init__(self, config: GpenConfig) -> None:
        super().__init__()
        self.config = config
        self.generator = StyleDecoder(config)
        taps = config.blur_kernel
        ch = config.channels_at
        self.encoder_names = [f"ecd{k}" for k in range(config.log_size - 1)]
        self.ecd0 = nn.Sequential(EncoderLayer(3, ch(config.size), 1, blur_taps=taps))
        for k, log_res in enumerate(range(config.log_size, 2, -1), start=1):
            layer = EncoderLayer(ch(2**log_res), ch(2 ** (log_res - 1)), 3, blur_taps=taps)
            self.add_module(f"ecd{k}", nn.Sequential(layer))
        self.final_linear = nn.Sequential(EqualLinear(ch(4) * 4 * 4, config.style_dim, activate=True))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Restore faces: B×3×size×size RGB in [-1, 1] → the same shape, not clamped."""
        size = self.config.size
        if x.ndim != 4 or x.shape[0] < 1 or x.shape[1] != 3 or x.shape[2] != size or x.shape[3] != size:
            raise InvalidParameter(f"GPEN-{size} expects B×3×{size}×{size} input with B ≥ 1, got {tuple(x.shape)}")
        features = []
        for name in self.encoder_names:
            x = getattr(self, name)(x)
            features.append(x)
        code = self.final_linear(x.reshape(x.shape[0], -1))
        return self.generator(code, features[::-1])


# --------------------------------------------------------------------------------------------------------------------
# Building and loading


def build_gpen(config: GpenConfig) -> GpenGenerator:
    """A GPEN generator with the official random initialisation (useful for tests and benchmarks only)."""
    return GpenGenerator(config)


def load_gpen(
    checkpoint_path: str | Path,
    size: int | None = None,
    *,
    config: GpenConfig | None = None,
    map_location: str | torch.device = "cpu",
) -> GpenGenerator:
    """Load a released GPEN ``.pth`` (flat state dict, or wrapped as ``{'g_ema': ...}``) strictly, in eval mode.

    The variant is ``config`` if given, else the registry entry for ``size``, else inferred from the tensor shapes.
    Any disagreement between file and architecture raises ``ModelUnavailable`` naming the offending keys.
    """
    path = Path(checkpoint_path)
    state = read_state_dict(path, map_location, model_name="GPEN", wrapper_keys=("g_ema",))
    if config is None:
        config = _variant_for_size(size) if size is not None else infer_gpen_config(state)
    elif size is not None and size != config.size:
        raise InvalidParameter(f"size={size} contradicts config.size={config.size}")
    model = load_strict(
        lambda: build_gpen(config), state, subject=f"GPEN checkpoint {path} does not match GPEN-{config.size} {config}"
    )
    logger.info("loaded GPEN-%d from %s (%s)", config.size, path, config)
    return model


def infer_gpen_config(state: dict[str, torch.Tensor]) -> GpenConfig:
    """Recover the ``GpenConfig`` of a GPEN state dict from its key names and tensor shapes."""
    try:
        encoder_depth = len({m.group(1) for key in state if (m := re.match(r"ecd(\d+)\.", key))})
        n_mlp = len([key for key in state if re.fullmatch(r"generator\.style\.\d+\.weight", key)])
        style_dim = state["final_linear.0.weight"].shape[0]
        channels_4px = state["generator.input.input"].shape[1]
        size = 2 ** (encoder_depth + 1)
        narrow = channels_4px / 512
        channel_multiplier = 2
        if size >= 64:
            # to_rgbs.3 works at 64 px on the concatenated (2×) channels.
            channels_64px = state["generator.to_rgbs.3.conv.weight"].shape[2] // 2
            channel_multiplier = max(1, round(channels_64px / (256 * narrow)))
        return GpenConfig(
            size=size, style_dim=style_dim, n_mlp=n_mlp, channel_multiplier=channel_multiplier, narrow=narrow
        )
    except (KeyError, IndexError, AttributeError, InvalidParameter) as exc:
        raise ModelUnavailable(f"not a GPEN state dict: cannot infer its configuration ({exc!r})") from exc


def _variant_for_size(size: int) -> GpenConfig:
    for config in GPEN_VARIANTS.values():
        if config.size == size:
            return config
    known = sorted(c.size for c in GPEN_VARIANTS.values())
    raise InvalidParameter(f"no GPEN variant of size {size}; known sizes {known}")


# How the face restorer runs this family (``architecture.restorer_architecture`` finds it by the module's name).
RESTORER = Architecture(load=load_gpen)
