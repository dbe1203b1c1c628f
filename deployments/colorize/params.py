"""Options of the colorize job (HTTP form/JSON, bucket metadata, CLI)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import Field, field_validator

from deployments.colorize.pipeline import DEFAULT_SIZE_PX, INPUT_MULTIPLE_PX
from deployments.common.params import JobParams
from deployments.common.settings import get_model_settings
from deployments.common.weights import ModelSpec, load_manifest

COLORIZATION = "colorization"  # the manifest task of a colorizer
MAX_SIZE_PX = 1024  # the network input's side: the cost grows with its square, the official default is 512


def colorizer_models(manifest: Mapping[str, ModelSpec]) -> list[str]:
    """The manifest's colorization models, in its order (the first is the default)."""
    return [name for name, spec in manifest.items() if spec.task == COLORIZATION]


# Every colorization model the service offers (the manifest's ``task: colorization`` entries), read once at import.
COLORIZE_MODELS = tuple(colorizer_models(load_manifest(get_model_settings().models_manifest)))


class ColorizeParams(JobParams):
    model: Literal[COLORIZE_MODELS] | None = Field(
        None,
        description="colorization model; default: the first whose weights are present, in the order "
        f"{', '.join(COLORIZE_MODELS)} ({COLORIZE_MODELS[0]}: the authors' recommendation)",
    )
    input_size: int = Field(
        DEFAULT_SIZE_PX,
        ge=INPUT_MULTIPLE_PX * 8,
        le=MAX_SIZE_PX,
        description="the side the network sees (the official --input_size): colours are predicted at this size and "
        "laid on the photo's own full-resolution lightness; a multiple of 32",
    )
    format: Literal["auto", "jpeg", "png", "webp"] = Field("auto", description="auto: JPEG for JPEG input, else PNG")

    @field_validator("input_size")
    @classmethod
    def _multiple_of_32(cls, value: int) -> int:
        if value % INPUT_MULTIPLE_PX:
            raise ValueError(f"input_size must be a multiple of {INPUT_MULTIPLE_PX}, got {value}")
        return value
