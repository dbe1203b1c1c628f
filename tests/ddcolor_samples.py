"""Random DDColor networks for tests: every tensor random, so every path of the network counts."""

from __future__ import annotations

import torch

from deployments.colorize.ddcolor import DDColor, build_ddcolor


def randomized_ddcolor(variant: str, seed: int = 0) -> DDColor:
    """A DDColor whose constants at initialisation (gammas, norms, biases, BatchNorm statistics) are random too (the
    constructor already draws the weights and the spectral vectors), colouring strongly."""
    torch.manual_seed(seed)
    model = build_ddcolor(variant).eval().requires_grad_(False)
    for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
        if name in ("mean", "std") or name.endswith(("weight_u", "weight_v")) or tensor.ndim != 1:
            continue
        if name.endswith("running_var"):
            tensor.uniform_(0.5, 2.0)
        elif name.endswith("gamma"):
            tensor.uniform_(0.1, 0.6)
        else:
            tensor.copy_((1.0 if name.endswith("weight") else 0.0) + 0.2 * torch.randn_like(tensor))
    # Random weights alone give |ab| < 1 (a gray result); a larger colour embedding gives |ab| of tens, as trained
    # weights do, so the post-processing is tested on real colour.
    model.decoder.color_decoder.color_embed.layers[2].weight.mul_(100.0)
    model.decoder.color_decoder.color_embed.layers[2].bias.mul_(100.0)
    return model
