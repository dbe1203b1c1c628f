"""Device choice for torch engines (imports torch: only model replicas use it)."""

from __future__ import annotations

from dataclasses import dataclass

import torch


def pick_device(name: str) -> torch.device:
    """``auto``: CUDA when present, else CPU; anything else is passed to ``torch.device``."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def to_memory_format(
    model: torch.nn.Module, memory_format: torch.memory_format = torch.channels_last
) -> torch.nn.Module:
    """The 4-D weights and buffers (convolutions) in ``memory_format``, in place. Not ``Module.to(memory_format=...)``:
    that refuses the 5-D modulated-convolution weights of GPEN and GFPGAN ("required rank 4 tensor")."""
    with torch.no_grad():
        for tensor in [*model.parameters(), *model.buffers()]:
            if tensor.dim() == 4:
                tensor.data = tensor.data.contiguous(memory_format=memory_format)
    return model


@dataclass(frozen=True)
class DeviceOptions:
    """``user_config`` of a torch deployment without other tunables."""

    device: str = "auto"
