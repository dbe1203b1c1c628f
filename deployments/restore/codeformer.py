"""CodeFormer blind face restoration (Zhou et al., NeurIPS 2022), in pure PyTorch.

Computes the same function as ``CodeFormer`` in sczhou/CodeFormer ``basicsr/archs/codeformer_arch.py`` (with its
VQGAN parts from ``vqgan_arch.py``) built as the official ``inference_codeformer.py`` builds it (``dim_embd=512,
codebook_size=1024, n_head=8, n_layers=9, connect_list=['32', '64', '128', '256']``) and called as it calls it
(``net(face, w=w, adain=True)[0]``). Parameter names are the official ones, so the released ``codeformer.pth``
(weights under ``params_ema``) loads unchanged with a strict ``load_state_dict``.

Architecture in one breath: a VQGAN encoder turns the 512 px face into a 16×16 grid of 256-d features; a 9-layer
transformer predicts, for each of the 256 grid cells, one entry of a learned 1024-code codebook; the chosen codes,
re-coloured to the input's feature statistics (AdaIN), go through the VQGAN decoder. The fidelity weight ``w`` scales
how much of the encoder's own features (controllable feature transformation, at 32…256 px) is added back into the
decoder: 0 trusts the codebook alone (most enhancement), 1 adds them in full (most faithful to the input).

Tensors: ``B×3×512×512`` RGB float in [-1, 1] in, the restored image in the same layout out (not clamped; the
official post-processing clamps to [-1, 1]).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from deployments.common.errors import InvalidParameter
from deployments.restore.architecture import Architecture
from deployments.restore.checkpoint import load_strict, read_state_dict
from deployments.restore.vqgan import (
    NORM_GROUPS,
    AttnBlock,
    BlockStack,
    Codebook,
    Downsample,
    ResBlock,
    Upsample,
    group_norm,
)

logger = logging.getLogger(__name__)

_ADAIN_EPS = 1e-5
_FUSE_SLOPE = 0.2


@dataclass(frozen=True)
class CodeFormerConfig:
    """Hyper-parameters; defaults are the released model (official names in brackets).

    ``base_channels`` [nf] × ``channel_mults`` [ch_mult] are the VQGAN widths from full size down to the latent grid;
    ``code_dim`` [emb_dim] is the codebook vector size, ``embed_dim`` [dim_embd] the transformer width (its MLP is
    twice as wide); ``connect_resolutions`` [connect_list] are where encoder features are fused into the decoder.
    """

    size_px: int = 512
    base_channels: int = 64
    channel_mults: tuple[int, ...] = (1, 2, 2, 4, 4, 8)
    res_blocks: int = 2
    attn_resolutions: tuple[int, ...] = (16,)
    codebook_size: int = 1024
    code_dim: int = 256
    embed_dim: int = 512
    n_head: int = 8
    n_layers: int = 9
    connect_resolutions: tuple[int, ...] = (32, 64, 128, 256)

    def __post_init__(self) -> None:
        levels = len(self.channel_mults)
        if levels < 1 or self.size_px < 1 or self.size_px & (self.size_px - 1) or self.size_px >> (levels - 1) < 1:
            raise InvalidParameter(f"CodeFormer size_px must be a power of two ≥ 2^(levels-1), got {self}")
        if any(self.base_channels * mult % NORM_GROUPS for mult in self.channel_mults) or min(self.channel_mults) < 1:
            raise InvalidParameter(f"CodeFormer widths must be positive multiples of {NORM_GROUPS}, got {self}")
        if min(self.res_blocks, self.codebook_size, self.code_dim, self.n_head, self.n_layers) < 1:
            raise InvalidParameter(f"CodeFormer config needs positive dimensions, got {self}")
        if self.embed_dim < 1 or self.embed_dim % self.n_head:
            raise InvalidParameter(f"CodeFormer embed_dim must be a multiple of n_head, got {self}")
        ladder = [self.size_px >> level for level in range(levels - 1)]  # resolutions above the latent grid
        if any(res not in ladder for res in self.connect_resolutions) or len(set(self.connect_resolutions)) != len(
            self.connect_resolutions
        ):
            raise InvalidParameter(f"CodeFormer connect_resolutions must be distinct values of {ladder}, got {self}")

    @property
    def latent_px(self) -> int:
        """Side of the code grid (16 for the released model)."""
        return self.size_px >> (len(self.channel_mults) - 1)

    def channels_at(self, resolution_px: int) -> int:
        """VQGAN width at one resolution (the official ``channels`` table for the released model)."""
        return self.base_channels * self.channel_mults[int(math.log2(self.size_px // resolution_px))]


CODEFORMER_512 = CodeFormerConfig()


# --------------------------------------------------------------------------------------------------------------------
# CodeFormer's VQGAN: the layout of its encoder and decoder


def _encoder(config: CodeFormerConfig) -> BlockStack:
    """Conv in; per level ``res_blocks`` ResBlocks (+attention at ``attn_resolutions``) and a downsample; a middle
    ResBlock–attention–ResBlock; GroupNorm and a conv to ``code_dim`` (no activation in between, as the original).

    Features are tapped after the last ResBlock of each resolution (before its attention, if any)."""
    blocks: list[nn.Module] = [nn.Conv2d(3, config.base_channels, 3, padding=1)]
    taps: dict[int, int] = {}
    channels = config.base_channels
    resolution = config.size_px
    for level, mult in enumerate(config.channel_mults):
        for block in range(config.res_blocks):
            blocks.append(ResBlock(channels, config.base_channels * mult))
            channels = config.base_channels * mult
            if block == config.res_blocks - 1 and resolution in config.connect_resolutions:
                taps[len(blocks) - 1] = resolution
            if resolution in config.attn_resolutions:
                blocks.append(AttnBlock(channels))
        if level != len(config.channel_mults) - 1:
            blocks.append(Downsample(channels))
            resolution //= 2
    blocks += [ResBlock(channels, channels), AttnBlock(channels), ResBlock(channels, channels)]
    blocks += [group_norm(channels), nn.Conv2d(channels, config.code_dim, 3, padding=1)]
    return BlockStack(blocks, taps)


def _generator(config: CodeFormerConfig) -> BlockStack:
    """Mirror of the encoder: conv in, middle blocks, per level ResBlocks (+attention) and an upsample, then
    GroupNorm and a conv to RGB. Encoder features are fused after the first ResBlock of each connected resolution."""
    channels = config.base_channels * config.channel_mults[-1]
    blocks: list[nn.Module] = [nn.Conv2d(config.code_dim, channels, 3, padding=1)]
    blocks += [ResBlock(channels, channels), AttnBlock(channels), ResBlock(channels, channels)]
    taps: dict[int, int] = {}
    resolution = config.latent_px
    for level in reversed(range(len(config.channel_mults))):
        out_channels = config.base_channels * config.channel_mults[level]
        for block in range(config.res_blocks):
            blocks.append(ResBlock(channels, out_channels))
            channels = out_channels
            if block == 0 and resolution in config.connect_resolutions:
                taps[len(blocks) - 1] = resolution
            if resolution in config.attn_resolutions:
                blocks.append(AttnBlock(channels))
        if level != 0:
            blocks.append(Upsample(channels))
            resolution *= 2
    blocks += [group_norm(channels), nn.Conv2d(channels, 3, 3, padding=1)]
    return BlockStack(blocks, taps)


# --------------------------------------------------------------------------------------------------------------------
# Transformer and fusion (official ``codeformer_arch.py``)


class SelfAttention(nn.Module):
    """Multi-head attention with ``nn.MultiheadAttention``'s parameter layout; queries and keys carry the position
    embedding, values do not. Batch-first (B×N×E); the original runs sequence-first, which is the same arithmetic."""

    def __init__(self, embed_dim: int, n_head: int) -> None:
        super().__init__()
        self.n_head = n_head
        self.in_proj_weight = nn.Parameter(torch.empty(3 * embed_dim, embed_dim))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * embed_dim))
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        nn.init.xavier_uniform_(self.in_proj_weight)

    def forward(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        batch, tokens, embed_dim = x.shape
        w_q, w_k, w_v = self.in_proj_weight.chunk(3)
        b_q, b_k, b_v = self.in_proj_bias.chunk(3)
        query_key = x + pos
        heads = [
            F.linear(source, weight, bias).view(batch, tokens, self.n_head, -1).transpose(1, 2)
            for source, weight, bias in ((query_key, w_q, b_q), (query_key, w_k, b_k), (x, w_v, b_v))
        ]
        attended = F.scaled_dot_product_attention(*heads)  # B×heads×N×(E/heads), scale 1/√(E/heads)
        return self.out_proj(attended.transpose(1, 2).reshape(batch, tokens, embed_dim))


class TransformerSALayer(nn.Module):
    """Pre-norm transformer layer: x + attention(LN(x)), then x + MLP(LN(x)) with GELU."""

    def __init__(self, embed_dim: int, n_head: int, mlp_dim: int) -> None:
        super().__init__()
        self.self_attn = SelfAttention(embed_dim, n_head)
        self.linear1 = nn.Linear(embed_dim, mlp_dim)
        self.linear2 = nn.Linear(mlp_dim, embed_dim)
        self.norm1 = nn.LayerNorm(embed_dim)
        self.norm2 = nn.LayerNorm(embed_dim)

    def forward(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.norm1(x), pos)
        return x + self.linear2(F.gelu(self.linear1(self.norm2(x))))


class FuseBlock(nn.Module):
    """Controllable feature transformation (official ``Fuse_sft_block``): from encoder and decoder features predict a
    per-pixel scale and shift, and add ``w × (decoder × scale + shift)`` to the decoder features."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.encode_enc = ResBlock(2 * channels, channels)
        self.scale = self._head(channels)
        self.shift = self._head(channels)

    @staticmethod
    def _head(channels: int) -> nn.Sequential:
        return nn.Sequential(
            nn.Conv2d(channels, channels, 3, padding=1),
            nn.LeakyReLU(_FUSE_SLOPE),
            nn.Conv2d(channels, channels, 3, padding=1),
        )

    def forward(self, enc_feat: torch.Tensor, dec_feat: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        joint = self.encode_enc(torch.cat([enc_feat, dec_feat], dim=1))
        return dec_feat + weight * (dec_feat * self.scale(joint) + self.shift(joint))


def _mean_std(feat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel spatial mean and std (unbiased variance + 1e-5, as the original ``calc_mean_std``)."""
    flat = feat.flatten(2)
    mean = flat.mean(dim=2)[..., None, None]
    std = (flat.var(dim=2) + _ADAIN_EPS).sqrt()[..., None, None]
    return mean, std


def adaptive_instance_norm(content: torch.Tensor, style: torch.Tensor) -> torch.Tensor:
    """Give ``content`` the per-channel mean and std of ``style`` (the codes take the input's colour and light)."""
    content_mean, content_std = _mean_std(content)
    style_mean, style_std = _mean_std(style)
    return (content - content_mean) / content_std * style_std + style_mean


# --------------------------------------------------------------------------------------------------------------------
# The network


class CodeFormer(nn.Module):
    """``forward(x, w)`` restores ``x`` (B×3×S×S RGB in [-1, 1]) and returns the image tensor only (the original
    also returns logits and encoder features, which inference discards).

    ``w`` is the fidelity weight in [0, 1]: a float for the whole batch, or a tensor of B per-face weights.
    """

    def __init__(self, config: CodeFormerConfig = CODEFORMER_512) -> None:
        super().__init__()
        self.config = config
        self.position_emb = nn.Parameter(torch.zeros(config.latent_px**2, config.embed_dim))
        self.encoder = _encoder(config)
        self.quantize = Codebook(config.codebook_size, config.code_dim)
        self.generator = _generator(config)
        self.feat_emb = nn.Linear(config.code_dim, config.embed_dim)
        self.ft_layers = nn.Sequential(
            *(TransformerSALayer(config.embed_dim, config.n_head, 2 * config.embed_dim) for _ in range(config.n_layers))
        )
        self.idx_pred_layer = nn.Sequential(
            nn.LayerNorm(config.embed_dim), nn.Linear(config.embed_dim, config.codebook_size, bias=False)
        )
        self.fuse_convs_dict = nn.ModuleDict(
            {str(res): FuseBlock(config.channels_at(res)) for res in config.connect_resolutions}
        )

    def forward(self, x: torch.Tensor, w: float | torch.Tensor) -> torch.Tensor:
        size = self.config.size_px
        if x.ndim != 4 or x.shape[0] < 1 or x.shape[1] != 3 or x.shape[2] != size or x.shape[3] != size:
            raise InvalidParameter(f"CodeFormer expects B×3×{size}×{size} input with B ≥ 1, got {tuple(x.shape)}")
        fidelity = fidelity_weights(w, x.shape[0]).to(device=x.device, dtype=x.dtype)

        enc_feats: dict[int, torch.Tensor] = {}
        h = x
        for index, block in enumerate(self.encoder.blocks):
            h = block(h)
            if index in self.encoder.taps:
                enc_feats[self.encoder.taps[index]] = h
        lq_feat = h

        tokens = self.feat_emb(lq_feat.flatten(2).transpose(1, 2))  # B×N×E, N = latent_px² in raster order
        for layer in self.ft_layers:
            tokens = layer(tokens, self.position_emb)
        # The original takes the top-1 of softmax(logits): the same index as the argmax of the logits.
        codes = self.idx_pred_layer(tokens).argmax(dim=2)
        # Contiguous NCHW like the original: a channels-last view here would propagate through the decoder, and
        # CPU GroupNorm in that layout is both a different kernel and less accurate.
        quant = self.quantize.embedding(codes).transpose(1, 2).reshape(lq_feat.shape).contiguous()
        h = adaptive_instance_norm(quant, lq_feat)

        fuse = bool((fidelity > 0).any())  # the original skips fusion when w == 0; w × residual is 0 then anyway
        for index, block in enumerate(self.generator.blocks):
            h = block(h)
            if fuse and index in self.generator.taps:
                resolution = self.generator.taps[index]
                h = self.fuse_convs_dict[str(resolution)](enc_feats[resolution], h, fidelity)
        return h


def fidelity_weights(w: float | torch.Tensor, batch: int) -> torch.Tensor:
    """The caller's fidelity weight as a B×1×1×1 float tensor; each value must lie in [0, 1]."""
    if isinstance(w, torch.Tensor):
        if w.ndim > 1 or (w.ndim == 1 and w.shape[0] != batch) or w.is_complex() or w.dtype == torch.bool:
            raise InvalidParameter(f"fidelity weight must be a number or {batch} numbers, got shape {tuple(w.shape)}")
        values = w.detach().float().expand(batch)
    elif isinstance(w, int | float) and not isinstance(w, bool):
        values = torch.full((batch,), float(w))
    else:
        raise InvalidParameter(f"fidelity weight must be a number in [0, 1], got {type(w).__name__}")
    if not bool(((values >= 0) & (values <= 1)).all()):  # NaN fails both comparisons
        raise InvalidParameter(f"fidelity weight must lie in [0, 1], got {values.tolist()}")
    return values.view(batch, 1, 1, 1)


# --------------------------------------------------------------------------------------------------------------------
# Building and loading


def build_codeformer(config: CodeFormerConfig = CODEFORMER_512) -> CodeFormer:
    """A CodeFormer on random weights (tests and benchmarks only)."""
    return CodeFormer(config)


def load_codeformer(
    checkpoint_path: str | Path,
    map_location: str | torch.device = "cpu",
    *,
    config: CodeFormerConfig = CODEFORMER_512,
) -> CodeFormer:
    """Load the released ``codeformer.pth`` (weights under ``params_ema``; ``params`` or a flat state dict also
    accepted) strictly, frozen in eval mode. A file that disagrees with ``config`` raises ``ModelUnavailable``
    naming the offending keys."""
    path = Path(checkpoint_path)
    state = read_state_dict(path, map_location, model_name="CodeFormer", wrapper_keys=("params_ema", "params"))
    model = load_strict(
        lambda: build_codeformer(config), state, subject=f"CodeFormer checkpoint {path} does not match {config}"
    )
    logger.info("loaded CodeFormer from %s (%s)", path, config)
    return model


# How the face restorer runs this family (``architecture.restorer_architecture`` finds it by the module's name).
RESTORER = Architecture(load=load_codeformer, takes_fidelity=True, round_output=True, keeps_gray=True)
