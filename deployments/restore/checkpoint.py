"""Reading released PyTorch checkpoints and loading them strictly into our own modules, shared by every restorer.

Files are opened with ``weights_only=True`` (no pickled code runs), and every way a file can be wrong (absent,
unreadable, not a state dict, keys or shapes that disagree with the architecture) becomes ``ModelUnavailable`` with a
message that names the first few offending keys, so an operator can tell a wrong file from a wrong variant.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch import nn

from deployments.common.errors import ModelUnavailable

MISMATCH_EXAMPLES = 5

ModuleT = TypeVar("ModuleT", bound=nn.Module)


def read_state_dict(
    path: Path, map_location: str | torch.device, *, model_name: str, wrapper_keys: tuple[str, ...] = ()
) -> dict[str, torch.Tensor]:
    """``torch.load`` a flat state dict, or one wrapped under the first of ``wrapper_keys`` the file has."""
    if not path.is_file():
        raise ModelUnavailable(f"{model_name} checkpoint not found: {path}")
    try:
        loaded: Any = torch.load(path, map_location=map_location, weights_only=True)
    except (OSError, RuntimeError, EOFError, ValueError, pickle.UnpicklingError) as exc:
        raise ModelUnavailable(f"cannot read {model_name} checkpoint {path}: {exc}") from exc
    if isinstance(loaded, dict):
        wrapper = next((key for key in wrapper_keys if key in loaded), None)
        if wrapper is not None:
            loaded = loaded[wrapper]
    if not isinstance(loaded, dict) or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in loaded.items()
    ):
        raise ModelUnavailable(f"{model_name} checkpoint {path} is not a state dict of named tensors")
    return loaded


def check_state_dict(expected: Mapping[str, torch.Tensor], state: Mapping[str, torch.Tensor], *, subject: str) -> None:
    """Raise ``ModelUnavailable`` (``"{subject}: ..."``) listing missing, unexpected and mis-shaped keys."""
    missing = [key for key in expected if key not in state]
    unexpected = [key for key in state if key not in expected]
    mis_shaped = [
        f"{key}: file {tuple(state[key].shape)} vs model {tuple(value.shape)}"
        for key, value in expected.items()
        if key in state and state[key].shape != value.shape
    ]
    if not (missing or unexpected or mis_shaped):
        return
    parts = []
    for label, items in (("missing", missing), ("unexpected", unexpected), ("shape mismatches", mis_shaped)):
        if items:
            shown = ", ".join(items[:MISMATCH_EXAMPLES]) + (", ..." if len(items) > MISMATCH_EXAMPLES else "")
            parts.append(f"{len(items)} {label} ({shown})")
    raise ModelUnavailable(
        f"{subject}: " + "; ".join(parts),
        details={
            "missing": missing[:MISMATCH_EXAMPLES],
            "unexpected": unexpected[:MISMATCH_EXAMPLES],
            "shape_mismatches": mis_shaped[:MISMATCH_EXAMPLES],
        },
    )


def load_strict(build: Callable[[], ModuleT], state: Mapping[str, torch.Tensor], *, subject: str) -> ModuleT:
    """The module ``build`` makes, holding ``state`` (as float32) exactly; frozen, in eval mode.

    ``build`` runs on the meta device and ``assign=True`` puts the file's tensors in place of the empty ones, so no
    random initialisation is computed or kept. ``state`` is checked against the module first.
    """
    with torch.device("meta"):
        model = build()
    check_state_dict(model.state_dict(), state, subject=subject)
    model.load_state_dict({key: value.float() for key, value in state.items()}, strict=True, assign=True)
    return model.eval().requires_grad_(False)
