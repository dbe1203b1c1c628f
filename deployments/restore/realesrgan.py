"""Real-ESRGAN whole-image upscaler (Wang et al., 2021): the RRDBNet of ESRGAN, in pure PyTorch.

Computes the same function as ``RRDBNet`` in XPixelGroup/BasicSR ``basicsr/archs/rrdbnet_arch.py`` and keeps its
parameter names, so the released ``RealESRGAN_x4plus.pth`` and ``RealESRGAN_x2plus.pth`` load with a strict
``load_state_dict``. The ×2 and ×1 networks are the ×4 one behind a pixel-unshuffle (2 and 4): the scale is therefore
read from the file (``conv_first`` takes 3, 12 or 48 channels), never configured.

Tensors: ``B×3×H×W`` RGB float in [0, 1] in, ``B×3×sH×sW`` out, not clamped (as the official net). H and W must be
multiples of ``input_multiple_px`` (2 for ×2); ``deployments.restore.tiles.split_tiles`` pads to that, as
``RealESRGANer.pre_process`` does, and the forward only checks. Pre- and post-processing are those of
``RealESRGANer.enhance``: ``/255``, and ``clamp(0, 1) * 255`` rounded to uint8.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from deployments.common.errors import InvalidParameter, ModelUnavailable
from deployments.common.image import require_image
from deployments.restore.checkpoint import load_strict, read_state_dict
from deployments.restore.tiles import paste_tile, split_tiles

logger = logging.getLogger(__name__)

_LEAKY_SLOPE = 0.2
_RESIDUAL_SCALE = 0.2  # the official, empirical down-weighting of every residual branch
_RGB = 3
# pixel-unshuffle factor in front of the ×4 trunk, per output scale
_UNSHUFFLE_BY_SCALE = {4: 1, 2: 2, 1: 4}
# the wrappers BasicSR writes, in the order RealESRGANer prefers them
_WRAPPER_KEYS = ("params_ema", "params")

DEFAULT_TILE_PX = 256
DEFAULT_OVERLAP_PX = 16


@dataclass(frozen=True)
class RrdbConfig:
    """Hyper-parameters of one RRDBNet; names and defaults are those of the official constructor."""

    scale: int = 4
    num_feat: int = 64
    num_block: int = 23
    num_grow_ch: int = 32

    def __post_init__(self) -> None:
        if self.scale not in _UNSHUFFLE_BY_SCALE:
            raise InvalidParameter(f"RRDBNet scale must be one of {sorted(_UNSHUFFLE_BY_SCALE)}, got {self.scale}")
        if self.num_feat < 1 or self.num_block < 0 or self.num_grow_ch < 1:
            raise InvalidParameter(f"RRDBNet config needs positive widths and num_block >= 0, got {self}")

    @property
    def input_multiple_px(self) -> int:
        """Input sides must be multiples of this (the pixel-unshuffle factor)."""
        return _UNSHUFFLE_BY_SCALE[self.scale]


REALESRGAN_VARIANTS: dict[str, RrdbConfig] = {
    "realesrgan-x4plus": RrdbConfig(scale=4),
    "realesrgan-x2plus": RrdbConfig(scale=2),
}


class ResidualDenseBlock(nn.Module):
    """Five densely connected 3×3 convs (each sees the input and every earlier output); residual scaled by 0.2."""

    def __init__(self, num_feat: int, num_grow_ch: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(num_feat, num_grow_ch, 3, 1, 1)
        self.conv2 = nn.Conv2d(num_feat + num_grow_ch, num_grow_ch, 3, 1, 1)
        self.conv3 = nn.Conv2d(num_feat + 2 * num_grow_ch, num_grow_ch, 3, 1, 1)
        self.conv4 = nn.Conv2d(num_feat + 3 * num_grow_ch, num_grow_ch, 3, 1, 1)
        self.conv5 = nn.Conv2d(num_feat + 4 * num_grow_ch, num_feat, 3, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = [x]
        for conv in (self.conv1, self.conv2, self.conv3, self.conv4):
            features.append(F.leaky_relu(conv(torch.cat(features, 1)), _LEAKY_SLOPE, inplace=True))
        return self.conv5(torch.cat(features, 1)) * _RESIDUAL_SCALE + x


class RRDB(nn.Module):
    """Residual in residual dense block: three dense blocks in a row, residual scaled by 0.2."""

    def __init__(self, num_feat: int, num_grow_ch: int) -> None:
        super().__init__()
        self.rdb1 = ResidualDenseBlock(num_feat, num_grow_ch)
        self.rdb2 = ResidualDenseBlock(num_feat, num_grow_ch)
        self.rdb3 = ResidualDenseBlock(num_feat, num_grow_ch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rdb3(self.rdb2(self.rdb1(x))) * _RESIDUAL_SCALE + x


class RrdbNet(nn.Module):
    """[pixel-unshuffle,] conv, ``num_block`` RRDBs with a global skip, two nearest ×2 upsamplings, two convs."""

    def __init__(self, config: RrdbConfig) -> None:
        super().__init__()
        self.config = config
        num_feat = config.num_feat
        self.conv_first = nn.Conv2d(_RGB * config.input_multiple_px**2, num_feat, 3, 1, 1)
        self.body = nn.Sequential(*(RRDB(num_feat, config.num_grow_ch) for _ in range(config.num_block)))
        self.conv_body = nn.Conv2d(num_feat, num_feat, 3, 1, 1)
        self.conv_up1 = nn.Conv2d(num_feat, num_feat, 3, 1, 1)
        self.conv_up2 = nn.Conv2d(num_feat, num_feat, 3, 1, 1)
        self.conv_hr = nn.Conv2d(num_feat, num_feat, 3, 1, 1)
        self.conv_last = nn.Conv2d(num_feat, _RGB, 3, 1, 1)

    @property
    def scale(self) -> int:
        return self.config.scale

    @property
    def input_multiple_px(self) -> int:
        return self.config.input_multiple_px

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """B×3×H×W RGB in [0, 1] → B×3×(scale·H)×(scale·W), not clamped."""
        multiple = self.input_multiple_px
        if x.ndim != 4 or x.shape[0] < 1 or x.shape[1] != _RGB or x.shape[2] % multiple or x.shape[3] % multiple:
            raise InvalidParameter(
                f"Real-ESRGAN ×{self.scale} expects B×3×H×W input with B ≥ 1 and H, W multiples of {multiple}, "
                f"got {tuple(x.shape)}"
            )
        feat = self.conv_first(F.pixel_unshuffle(x, multiple) if multiple > 1 else x)
        feat = feat + self.conv_body(self.body(feat))
        for conv in (self.conv_up1, self.conv_up2):
            feat = F.leaky_relu(conv(F.interpolate(feat, scale_factor=2, mode="nearest")), _LEAKY_SLOPE, inplace=True)
        return self.conv_last(F.leaky_relu(self.conv_hr(feat), _LEAKY_SLOPE, inplace=True))


# --------------------------------------------------------------------------------------------------------------------
# Building and loading


def build_realesrgan(config: RrdbConfig) -> RrdbNet:
    """An RRDBNet with PyTorch's default initialisation (for tests and benchmarks only)."""
    return RrdbNet(config)


def load_realesrgan(
    checkpoint_path: str | Path, map_location: str | torch.device = "cpu", *, scale: int | None = None
) -> RrdbNet:
    """Load a released Real-ESRGAN RRDBNet ``.pth`` strictly, frozen in eval mode.

    Accepts the BasicSR layouts RealESRGANer reads (``params_ema`` preferred, else ``params``) and a flat state dict.
    The architecture (scale included) is read from the tensors; ``scale``, when given, must agree with it. Any
    disagreement raises ``ModelUnavailable`` naming the offending keys.
    """
    path = Path(checkpoint_path)
    state = read_state_dict(path, map_location, model_name="Real-ESRGAN", wrapper_keys=_WRAPPER_KEYS)
    config = infer_rrdb_config(state)
    if scale is not None and scale != config.scale:
        raise ModelUnavailable(f"Real-ESRGAN checkpoint {path} is a ×{config.scale} network, expected ×{scale}")
    model = load_strict(
        lambda: build_realesrgan(config), state, subject=f"Real-ESRGAN checkpoint {path} does not match {config}"
    )
    logger.info("loaded Real-ESRGAN ×%d from %s (%s)", config.scale, path, config)
    return model


def infer_rrdb_config(state: dict[str, torch.Tensor]) -> RrdbConfig:
    """Recover the ``RrdbConfig`` of an RRDBNet state dict from its key names and tensor shapes."""
    try:
        num_feat, in_channels = state["conv_first.weight"].shape[:2]
        scales = {_RGB * factor**2: scale for scale, factor in _UNSHUFFLE_BY_SCALE.items()}
        if in_channels not in scales:
            raise ValueError(f"conv_first takes {in_channels} channels, not one of {sorted(scales)}")
        num_block = len({m.group(1) for key in state if (m := re.match(r"body\.(\d+)\.", key))})
        num_grow_ch = state["body.0.rdb1.conv1.weight"].shape[0] if num_block else RrdbConfig.num_grow_ch
        return RrdbConfig(scale=scales[in_channels], num_feat=num_feat, num_block=num_block, num_grow_ch=num_grow_ch)
    except (KeyError, ValueError, InvalidParameter) as exc:
        raise ModelUnavailable(f"not a Real-ESRGAN RRDBNet state dict: cannot infer its configuration ({exc})") from exc


# --------------------------------------------------------------------------------------------------------------------
# Pre- and post-processing, and the in-process tiled upscale


def rgb_to_input(pixels: np.ndarray, *, device: torch.device, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """N×H×W×3 uint8 RGB → N×3×H×W in [0, 1] on ``device`` (RealESRGANer's ``/255``)."""
    batch = torch.from_numpy(np.ascontiguousarray(pixels)).to(device)
    return (batch.permute(0, 3, 1, 2).float() / 255.0).to(dtype)


def output_to_rgb(out: torch.Tensor) -> np.ndarray:
    """N×3×H×W network output → N×H×W×3 uint8 RGB: clamp to [0, 1], ×255, round half to even (RealESRGANer)."""
    pixels = (out.float().clamp_(0.0, 1.0) * 255.0).round_().to(torch.uint8)
    return pixels.permute(0, 2, 3, 1).contiguous().cpu().numpy()


def upscale_image_realesrgan(
    model: RrdbNet,
    rgb: np.ndarray,
    *,
    tile_px: int = DEFAULT_TILE_PX,
    overlap_px: int = DEFAULT_OVERLAP_PX,
    batch_size: int = 1,
) -> np.ndarray:
    """Upscale one HxWx3 uint8 RGB image by ``model.scale`` in tiles (``split_tiles``), ``batch_size`` tiles per
    forward pass on the model's device, pasted as they come so only one batch of upscaled tiles is held at once."""
    require_image(rgb)
    if batch_size < 1:
        raise InvalidParameter(f"batch_size must be at least 1, got {batch_size}")
    parameter = next(model.parameters())
    scale = model.scale
    tiles = split_tiles(rgb, tile_px=tile_px, overlap_px=overlap_px, multiple_px=model.input_multiple_px)
    out = np.empty((rgb.shape[0] * scale, rgb.shape[1] * scale, 3), dtype=np.uint8)
    with torch.inference_mode():
        for start in range(0, len(tiles), batch_size):
            batch = tiles[start : start + batch_size]
            pixels = np.stack([tile.pixels for tile in batch])
            upscaled = output_to_rgb(model(rgb_to_input(pixels, device=parameter.device, dtype=parameter.dtype)))
            for tile, tile_out in zip(batch, upscaled, strict=True):
                paste_tile(out, tile, tile_out, scale)
    return out
