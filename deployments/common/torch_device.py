"""Device choice and mixed precision for torch engines (imports torch: only model replicas use it)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

from deployments.common.errors import InvalidParameter

# What a torch deployment's ``user_config: {autocast_dtype: ...}`` may name: the one table and the one check
# (``check_autocast_dtype``) every predictor's options use. It applies on CUDA only: CPU passes stay float32.
AUTOCAST_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}


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


def check_autocast_dtype(name: str | None) -> None:
    if name is not None and name not in AUTOCAST_DTYPES:
        raise InvalidParameter(f"autocast_dtype must be one of {sorted(AUTOCAST_DTYPES)} or null, got {name!r}")


def autocast_dtype(name: str | None, device: torch.device) -> torch.dtype | None:
    """The dtype to autocast to on ``device``: None off CUDA, so CPU passes stay float32 (and match the official
    output), and None without a name."""
    check_autocast_dtype(name)
    return AUTOCAST_DTYPES[name] if name is not None and device.type == "cuda" else None


def autocast(dtype: torch.dtype | None) -> contextlib.AbstractContextManager:
    """``torch.autocast`` on CUDA to ``dtype`` (from :func:`autocast_dtype`); nothing for None."""
    return torch.autocast("cuda", dtype=dtype) if dtype is not None else contextlib.nullcontext()


@dataclass(frozen=True)
class DeviceOptions:
    """``user_config`` of a torch deployment without other tunables."""

    device: str = "auto"


@dataclass(frozen=True)
class TorchOptions(DeviceOptions):
    """``device`` (``auto`` picks CUDA when present) and ``autocast_dtype`` (``AUTOCAST_DTYPES``, CUDA only): what
    every torch predictor's options start from."""

    autocast_dtype: str | None = None

    def __post_init__(self) -> None:
        check_autocast_dtype(self.autocast_dtype)
