"""Device choice for torch engines (imports torch: only model replicas use it)."""

from __future__ import annotations

from dataclasses import dataclass

import torch


def pick_device(name: str) -> torch.device:
    """``auto``: CUDA when present, else CPU; anything else is passed to ``torch.device``."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


@dataclass(frozen=True)
class DeviceOptions:
    """``user_config`` of a torch deployment without other tunables."""

    device: str = "auto"
