"""DDColor's colour decoder: 100 learned colour queries refined against three feature scales (Mask2Former style).

Same function and parameter names as ``MultiScaleColorDecoder`` in piddnad/DDColor ``ddcolor/model.py`` with its
layers from ``transformer_utils.py``, as the official inference builds it (hidden 256, 8 heads, FFN 2048, 9 layers,
3 scales, post-norm, no dropout). Per layer: cross-attention from the queries to one scale (layer ``i`` reads scale
``i % 3``), then self-attention, then the FFN, each followed by a residual and a LayerNorm (eps 1e-5, PyTorch's
default, unlike the encoder's 1e-6). Sine positions are added to the keys of the cross-attention and the query
positions to queries and keys, never to the values. The queries then become colour embeddings whose dot product with
the full-size image embedding gives one map per query. Tensors are batch-first here (the official code is
sequence-first); attention runs through ``scaled_dot_product_attention`` with ``nn.MultiheadAttention``'s weights.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

HIDDEN = 256
HEADS = 8
FFN_WIDTH = 2048
POS_TEMPERATURE = 10000.0
POS_EPS = 1e-6


def sine_positions(height: int, width: int, channels: int, device: torch.device) -> torch.Tensor:
    """DETR's normalised sine embedding of an ``height×width`` grid → ``(H·W)×channels`` (y half, then x half)."""
    half = channels // 2
    ys = torch.arange(1, height + 1, dtype=torch.float32, device=device)
    xs = torch.arange(1, width + 1, dtype=torch.float32, device=device)
    ys = ys / (height + POS_EPS) * (2 * math.pi)
    xs = xs / (width + POS_EPS) * (2 * math.pi)
    dim_t = torch.arange(half, dtype=torch.float32, device=device)
    dim_t = POS_TEMPERATURE ** (2 * torch.div(dim_t, 2, rounding_mode="floor") / half)

    def embed(values: torch.Tensor) -> torch.Tensor:
        angles = values[:, None] / dim_t
        return torch.stack((angles[:, 0::2].sin(), angles[:, 1::2].cos()), dim=2).flatten(1)

    pos_y = embed(ys)[:, None, :].expand(height, width, half)
    pos_x = embed(xs)[None, :, :].expand(height, width, half)
    return torch.cat((pos_y, pos_x), dim=2).reshape(height * width, channels)


class Attention(nn.Module):
    """Multi-head attention holding ``nn.MultiheadAttention``'s parameters (packed ``in_proj``, ``out_proj``)."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.in_proj_weight = nn.Parameter(nn.init.xavier_uniform_(torch.empty(3 * dim, dim)))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * dim))
        self.out_proj = nn.Linear(dim, dim)

    def _split(self, x: torch.Tensor, part: int) -> torch.Tensor:
        dim = x.shape[-1]
        rows = slice(part * dim, (part + 1) * dim)
        projected = F.linear(x, self.in_proj_weight[rows], self.in_proj_bias[rows])
        return projected.unflatten(-1, (self.heads, dim // self.heads)).transpose(1, 2)

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        """``B×Lq×C``, ``B×Lk×C``, ``B×Lk×C`` → ``B×Lq×C``."""
        attended = F.scaled_dot_product_attention(self._split(query, 0), self._split(key, 1), self._split(value, 2))
        return self.out_proj(attended.transpose(1, 2).flatten(2))


class SelfAttentionLayer(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.self_attn = Attention(dim, heads)
        self.norm = nn.LayerNorm(dim)

    def forward(self, tgt: torch.Tensor, query_pos: torch.Tensor) -> torch.Tensor:
        q = tgt + query_pos
        return self.norm(tgt + self.self_attn(q, q, tgt))


class CrossAttentionLayer(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.multihead_attn = Attention(dim, heads)
        self.norm = nn.LayerNorm(dim)

    def forward(
        self, tgt: torch.Tensor, memory: torch.Tensor, pos: torch.Tensor, query_pos: torch.Tensor
    ) -> torch.Tensor:
        return self.norm(tgt + self.multihead_attn(tgt + query_pos, memory + pos, memory))


class FFNLayer(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.linear1 = nn.Linear(dim, hidden)
        self.linear2 = nn.Linear(hidden, dim)
        self.norm = nn.LayerNorm(dim)

    def forward(self, tgt: torch.Tensor) -> torch.Tensor:
        return self.norm(tgt + self.linear2(F.relu(self.linear1(tgt))))


class MLP(nn.Module):
    """Linear layers with ReLU between them (none after the last)."""

    def __init__(self, dim: int, out_dim: int, num_layers: int) -> None:
        super().__init__()
        widths = [dim] * num_layers + [out_dim]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers[:-1]:
            x = F.relu(layer(x))
        return self.layers[-1](x)


class MultiScaleColorDecoder(nn.Module):
    """``forward(scales, image_embedding)``: three ``B×Ci×hi×wi`` features and ``B×256×H×W`` → ``B×Q×H×W``."""

    def __init__(self, in_channels: tuple[int, ...], num_queries: int = 100, dec_layers: int = 9) -> None:
        super().__init__()
        self.query_feat = nn.Embedding(num_queries, HIDDEN)
        self.query_embed = nn.Embedding(num_queries, HIDDEN)
        self.level_embed = nn.Embedding(len(in_channels), HIDDEN)
        self.input_proj = nn.ModuleList(nn.Conv2d(channels, HIDDEN, kernel_size=1) for channels in in_channels)
        self.transformer_self_attention_layers = nn.ModuleList(
            SelfAttentionLayer(HIDDEN, HEADS) for _ in range(dec_layers)
        )
        self.transformer_cross_attention_layers = nn.ModuleList(
            CrossAttentionLayer(HIDDEN, HEADS) for _ in range(dec_layers)
        )
        self.transformer_ffn_layers = nn.ModuleList(FFNLayer(HIDDEN, FFN_WIDTH) for _ in range(dec_layers))
        self.decoder_norm = nn.LayerNorm(HIDDEN)
        self.color_embed = MLP(HIDDEN, HIDDEN, 3)

    def forward(self, scales: list[torch.Tensor], image_embedding: torch.Tensor) -> torch.Tensor:
        memories, positions = [], []
        for level, feature in enumerate(scales):
            projected = self.input_proj[level](feature).flatten(2).transpose(1, 2)  # B×(h·w)×C
            memories.append(projected + self.level_embed.weight[level])
            h, w = feature.shape[-2:]
            positions.append(sine_positions(h, w, HIDDEN, feature.device).to(feature.dtype))
        batch = image_embedding.shape[0]
        query_pos = self.query_embed.weight.expand(batch, -1, -1)
        output = self.query_feat.weight.expand(batch, -1, -1)
        layers = zip(
            self.transformer_cross_attention_layers,
            self.transformer_self_attention_layers,
            self.transformer_ffn_layers,
        )
        for i, (cross, self_attention, ffn) in enumerate(layers):
            level = i % len(scales)
            output = cross(output, memories[level], positions[level], query_pos)
            output = ffn(self_attention(output, query_pos))
        color_embed = self.color_embed(self.decoder_norm(output))
        return torch.einsum("bqc,bchw->bqhw", color_embed, image_embedding)
