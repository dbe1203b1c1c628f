"""Small GPEN generators for tests, with every path switched on."""

from __future__ import annotations

import torch

from deployments.restore.gpen import GpenConfig, GpenGenerator, build_gpen


def randomized_gpen(config: GpenConfig, seed: int = 0) -> GpenGenerator:
    """A GPEN with non-zero feature-injection weights and biases (they start at zero), so every path contributes."""
    torch.manual_seed(seed)
    model = build_gpen(config).eval().requires_grad_(False)
    for name, param in model.named_parameters():
        if name.endswith(("noise.weight", "bias")):
            param.normal_(0.0, 0.3)
    return model
