"""Options of the restoration job (HTTP form/JSON, bucket metadata, CLI)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from deployments.common.params import JobParams

RESTORE_MODELS = ("gpen-bfr-512", "gpen-bfr-256")


class RestoreParams(JobParams):
    model: Literal["gpen-bfr-512", "gpen-bfr-256"] = Field("gpen-bfr-512", description="restoration model")
    upscale: Literal[1, 2, 4] = Field(1, description="whole-image upscale factor (Lanczos, tiled)")
    max_faces: int = Field(32, ge=1, le=64, description="restore at most this many faces, largest first")
    only_center_face: bool = Field(False, description="restore only the face nearest the image centre")
    blend: float = Field(1.0, ge=0.0, le=1.0, description="0 keeps the original face, 1 the restored one")
    format: Literal["auto", "jpeg", "png", "webp"] = Field("auto", description="auto: JPEG for JPEG input, else PNG")

    @field_validator("upscale", mode="before")
    @classmethod
    def _form_digits(cls, value: object) -> object:
        """Form fields arrive as text: accept "2" for 2."""
        return int(value) if isinstance(value, str) and value.strip().isdigit() else value
