"""How one face-restoration network family is loaded and called, as its official inference does it.

Each family's module (``deployments/restore/<architecture>.py``, the manifest entry's ``architecture``) declares its
``RESTORER``; :func:`restorer_architecture` finds it by that name, so a new restorer is one manifest entry and one
module, with no table to edit.

The options side (``params.py``, in the ingress) must not import torch, which every family module does; it reads a
family's traits (``takes_fidelity``...) from the ``RESTORER = Architecture(...)`` line of the module's source instead
(:func:`declared_traits`: literal keywords only), the same declaration the restorer imports.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deployments.common.errors import ModelUnavailable
from deployments.common.weights import ModelSpec

if TYPE_CHECKING:  # the families import torch; this module stays light for the options side
    from torch import nn


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


def declared_traits(spec: ModelSpec) -> dict[str, Any]:
    """The keywords of ``RESTORER = Architecture(...)`` in the family module of ``spec``, but ``load``, read from its
    source without importing it (no torch); ``ModelUnavailable`` when it declares none, as in
    :func:`restorer_architecture`."""
    traits = _traits_in(spec.architecture)
    if traits is None:
        raise ModelUnavailable(f"{spec.name} is a {spec.architecture!r} model, not a face restorer")
    return traits


@cache
def _traits_in(architecture: str) -> dict[str, Any] | None:
    found = importlib.util.find_spec(f"deployments.restore.{architecture}")
    if found is None or found.origin is None:
        return None
    for node in ast.parse(Path(found.origin).read_text(encoding="utf-8")).body:
        if (
            isinstance(node, ast.Assign)
            and [target.id for target in node.targets if isinstance(target, ast.Name)] == ["RESTORER"]
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
            and node.value.func.id == Architecture.__name__
        ):
            return {kw.arg: ast.literal_eval(kw.value) for kw in node.value.keywords if kw.arg != "load"}
    return None
