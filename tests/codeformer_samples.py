"""A small CodeFormer for tests, with every path switched on."""

from __future__ import annotations

import torch

from deployments.restore.codeformer import CodeFormer, CodeFormerConfig, build_codeformer

# Every part of the real architecture at 64 px: two code-grid attention blocks, one transformer layer, fusion at two
# resolutions, widths that change between levels (so the 1×1 shortcut convs exist).
TINY_CODEFORMER = CodeFormerConfig(
    size_px=64,
    base_channels=32,
    channel_mults=(1, 1, 2, 2),
    attn_resolutions=(8,),
    codebook_size=16,
    code_dim=16,
    embed_dim=32,
    n_head=2,
    n_layers=1,
    connect_resolutions=(16, 32),
)


def randomized_codeformer(config: CodeFormerConfig, seed: int = 0) -> CodeFormer:
    """A model whose biases, norms and position embedding are random too (they start constant), so all paths count."""
    torch.manual_seed(seed)
    model = build_codeformer(config).eval().requires_grad_(False)
    for name, param in model.named_parameters():
        if param.ndim == 1 or name == "position_emb":
            param.add_(torch.randn_like(param) * 0.1)
    return model
