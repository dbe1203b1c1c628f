"""Options of the cartoon job (HTTP form/JSON, bucket metadata, CLI)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from deployments.common.params import JobParams

DEFAULT_STYLE = "anime"


class CartoonParams(JobParams):
    """``style`` is checked against the styles passed as validation context (``{"styles": [...]}``)."""

    style: str = Field(DEFAULT_STYLE, description="anime, 3d, handdrawn, sketch, artstyle (see /v1/cartoon/styles)")
    format: Literal["auto", "png", "jpeg", "webp"] = Field("png", description="auto keeps the input's format")
    max_faces: int = Field(32, ge=0, le=64, description="stylize at most this many heads with the head model")

    @field_validator("style")
    @classmethod
    def _known_style(cls, value: str, info: ValidationInfo) -> str:
        style = value.strip().lower()
        known = (info.context or {}).get("styles")
        if known is not None and style not in known:
            raise ValueError(f"unknown style {value!r}; styles: {', '.join(known)}")
        return style
