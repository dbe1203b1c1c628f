"""Cartoon styles as data: each style is a pair of manifest entries (head model, whole-image model)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from deployments.common.weights import ModelSpec

HEAD_TASK = "cartoon_head"
BACKGROUND_TASK = "cartoon_background"


@dataclass(frozen=True)
class CartoonStyle:
    name: str
    head_model: str | None
    background_model: str | None


def cartoon_styles(manifest: Mapping[str, ModelSpec]) -> dict[str, CartoonStyle]:
    """Styles named by the ``style`` argument of the manifest's cartoon entries, in manifest order."""
    heads: dict[str, str] = {}
    backgrounds: dict[str, str] = {}
    for spec in manifest.values():
        if spec.task == HEAD_TASK:
            heads[str(spec.args["style"])] = spec.name
        elif spec.task == BACKGROUND_TASK:
            backgrounds[str(spec.args["style"])] = spec.name
    names = list(dict.fromkeys([*backgrounds, *heads]))
    return {name: CartoonStyle(name, heads.get(name), backgrounds.get(name)) for name in names}
