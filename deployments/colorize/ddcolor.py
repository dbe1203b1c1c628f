"""DDColor photo colorization (Kang et al., ICCV 2023), in pure PyTorch.

Computes the same function as ``DDColor`` in piddnad/DDColor ``ddcolor/model.py`` built as the official inference
builds it (``build_ddcolor_model``: ``MultiScaleColorDecoder``, 100 queries, 3 scales, 9 decoder layers,
``last_norm='Spectral'``, ``do_normalize=False``, 2 output channels). Parameter names are the official ones, so the
released files load unchanged and strictly.

Architecture in one breath: a ConvNeXt (T for ``tiny``, L for ``large``) reads the gray image; a U-Net of pixel
shuffles climbs back to full size (the image embedding); 100 colour queries attend to three of the U-Net's scales and
become colour embeddings; each query's dot product with the image embedding gives a map, and a 1×1 conv over those
maps and the input gives the Lab ``a``/``b`` channels.

Tensors: ``B×3×H×W`` RGB float32 in [0, 1] in (H, W multiples of 32; the official pipeline feeds the photo's L
channel as a gray RGB image, see ``pipeline.py``), the ``B×2×H×W`` ``(a, b)`` out, unclamped. The ImageNet
normalisation happens inside, as in the official network.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from deployments.colorize.color_decoder import MultiScaleColorDecoder
from deployments.colorize.convnext import CONVNEXT_L, CONVNEXT_T, ConvNeXt, ConvNextConfig
from deployments.colorize.pipeline import INPUT_MULTIPLE_PX
from deployments.colorize.unet import PixelShuffleUp, SpectralConv2d, UnetBlockWide
from deployments.common.errors import InvalidParameter, ModelUnavailable
from deployments.restore.checkpoint import load_strict, read_state_dict

logger = logging.getLogger(__name__)

DECODER_WIDTH = 512
NUM_QUERIES = 100
DEC_LAYERS = 9
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
# Released files may carry the pre-training classifier; the official model has no such module (loaded strict=False).
IGNORED_PREFIX = "encoder.arch.head_cls."
STEM_KEY = "encoder.arch.downsample_layers.0.0.weight"


@dataclass(frozen=True)
class DDColorVariant:
    name: str  # tiny | large
    encoder: ConvNextConfig


VARIANTS = {"tiny": DDColorVariant("tiny", CONVNEXT_T), "large": DDColorVariant("large", CONVNEXT_L)}
# The released checkpoints (MODEL_ZOO.md), by the name the authors give them.
RELEASED = {
    "ddcolor_modelscope": "large",
    "ddcolor_artistic": "large",
    "ddcolor_paper": "large",
    "ddcolor_paper_tiny": "tiny",
}


class ImageEncoder(nn.Module):
    """Holds the ConvNeXt under ``arch``, as the official ``ImageEncoder`` does (hence ``encoder.arch.*`` keys)."""

    def __init__(self, config: ConvNextConfig) -> None:
        super().__init__()
        self.arch = ConvNeXt(config)

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        return self.arch(x)


class DualDecoder(nn.Module):
    """The pixel decoder (U-Net to full size) and the colour decoder (queries over its stride 16, 8 and 4 outputs)."""

    def __init__(self, encoder_dims: tuple[int, int, int, int]) -> None:
        super().__init__()
        d0, d1, d2, d3 = encoder_dims
        width = DECODER_WIDTH
        self.layers = nn.ModuleList(
            [UnetBlockWide(d3, d2, width), UnetBlockWide(width, d1, width), UnetBlockWide(width, d0, width // 2)]
        )
        self.last_shuf = PixelShuffleUp(width // 2, width // 2, scale=4, batch_norm=False)
        self.color_decoder = MultiScaleColorDecoder(
            (width, width, width // 2), num_queries=NUM_QUERIES, dec_layers=DEC_LAYERS
        )

    def forward(self, features: list[torch.Tensor]) -> torch.Tensor:
        f0, f1, f2, f3 = features
        out0 = self.layers[0](f3, f2)
        out1 = self.layers[1](out0, f1)
        out2 = self.layers[2](out1, f0)
        return self.color_decoder([out0, out1, out2], self.last_shuf(out2))


class DDColor(nn.Module):
    """``forward(x)``: ``B×3×H×W`` gray RGB in [0, 1] → ``B×2×H×W`` Lab ``(a, b)``."""

    def __init__(self, variant: DDColorVariant) -> None:
        super().__init__()
        self.variant = variant
        self.register_buffer("mean", torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor(IMAGENET_STD).view(1, 3, 1, 1))
        self.encoder = ImageEncoder(variant.encoder)
        self.decoder = DualDecoder(variant.encoder.dims)
        refine = SpectralConv2d(NUM_QUERIES + 3, 2, 1, bias=True)
        self.refine_net = nn.Sequential(nn.Sequential(refine))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        sides_ok = x.ndim == 4 and not (x.shape[2] % INPUT_MULTIPLE_PX or x.shape[3] % INPUT_MULTIPLE_PX)
        if not sides_ok or x.shape[0] < 1 or x.shape[1] != 3:
            raise InvalidParameter(
                f"DDColor expects B×3×H×W with B ≥ 1 and H, W multiples of {INPUT_MULTIPLE_PX}, got {tuple(x.shape)}"
            )
        x = (x - self.mean) / self.std
        query_maps = self.decoder(self.encoder(x))
        return self.refine_net(torch.cat([query_maps, x], dim=1))


def build_ddcolor(variant: str | DDColorVariant) -> DDColor:
    """An uninitialised DDColor of ``variant`` (``tiny``/``large`` or a released name)."""
    return DDColor(variant if isinstance(variant, DDColorVariant) else VARIANTS[_variant_name(variant)])


def _variant_name(name: str) -> str:
    key = RELEASED.get(name, name)
    if key not in VARIANTS:
        known = ", ".join([*VARIANTS, *RELEASED])
        raise InvalidParameter(f"unknown DDColor variant {name!r}; known: {known}")
    return key


def variant_of(state: dict[str, torch.Tensor], *, path: Path) -> str:
    """``tiny`` or ``large``, read from the width of the ConvNeXt stem in the checkpoint."""
    stem = state.get(STEM_KEY)
    widths = {variant.encoder.dims[0]: name for name, variant in VARIANTS.items()}
    if stem is None or stem.ndim != 4 or stem.shape[0] not in widths:
        found = None if stem is None else tuple(stem.shape)
        raise ModelUnavailable(f"DDColor checkpoint {path}: cannot tell the variant ({STEM_KEY} is {found})")
    return widths[stem.shape[0]]


def load_ddcolor(
    checkpoint_path: str | Path, variant: str | None = None, map_location: str | torch.device = "cpu"
) -> DDColor:
    """Load a released DDColor file strictly, float32, frozen in eval mode.

    Reads ``{'params': state_dict}`` (the ``.pth`` files, ModelScope's ``pytorch_model.pt``) or a bare state dict;
    ``encoder.arch.head_cls.*`` is dropped, everything else must be exactly the official tensors. ``variant`` (``tiny``,
    ``large`` or a released name) is read from the tensors when not given; one that contradicts them raises
    ``ModelUnavailable``, as does any missing, extra or mis-shaped tensor.
    """
    path = Path(checkpoint_path)
    state = read_state_dict(path, map_location, model_name="DDColor", wrapper_keys=("params",))
    state = {key: value for key, value in state.items() if not key.startswith(IGNORED_PREFIX)}
    found = variant_of(state, path=path)
    if variant is not None and _variant_name(variant) != found:
        raise ModelUnavailable(f"DDColor checkpoint {path} holds the {found} network, not {variant!r}")
    model = load_strict(
        lambda: build_ddcolor(found), state, subject=f"DDColor checkpoint {path} does not match DDColor-{found}"
    )
    logger.info("loaded DDColor-%s from %s", found, path)
    return model
