"""How one face-restoration network family is loaded and called, as its official inference does it.

Each family's module (``deployments/restore/<architecture>.py``, the manifest entry's ``architecture``) declares its
``RESTORER``; :func:`restorer_architecture` finds it by that name, so a new restorer is one manifest entry and one
module, with no table to edit.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from torch import nn

from deployments.common.errors import ModelUnavailable
from deployments.common.weights import ModelSpec


@dataclass(frozen=True)
class Architecture:
    load: Callable[[Path], nn.Module]
    takes_fidelity: bool = False  # CodeFormer's ``w``
    round_output: bool = False  # basicsr's ``tensor2img`` rounds; GPEN's demo truncates
    keeps_gray: bool = False  # CodeFormer's inference returns a gray photo's faces gray (``gray.match_gray``)


def restorer_architecture(spec: ModelSpec) -> Architecture:
    """The ``RESTORER`` of the module named by ``spec.architecture``; ``ModelUnavailable`` when there is none."""
    try:
        module = importlib.import_module(f"deployments.restore.{spec.architecture}")
    except ModuleNotFoundError:
        module = None
    architecture = getattr(module, "RESTORER", None)
    if not isinstance(architecture, Architecture):
        raise ModelUnavailable(f"{spec.name} is a {spec.architecture!r} model, not a face restorer")
    return architecture
