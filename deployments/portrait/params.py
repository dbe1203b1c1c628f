"""Options of the portrait job (HTTP form/JSON, bucket metadata, CLI): one selfie into a generated portrait."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from deployments.common.params import JobParams
from deployments.portrait.styles import MAX_SIDE_PX, MIN_SIDE_PX, default_styles
from deployments.render.types import SIDE_MULTIPLE_PX

# Every style the service offers (``configs/portrait_styles.yaml``), read once at import.
STYLE_NAMES = tuple(default_styles())
MAX_PROMPT_CHARS = 300
MAX_COUNT = 4


class PortraitParams(JobParams):
    style: Literal[STYLE_NAMES] | None = Field(
        None,
        description=f"the style ({', '.join(STYLE_NAMES)}; GET /v1/portrait/styles); default: the one the prompt's "
        f"words name, else {STYLE_NAMES[0]}",
    )
    prompt: str | None = Field(
        None,
        max_length=MAX_PROMPT_CHARS,
        description="words added to the style's prompt (zh or en: Chinese is rewritten into the renderer's English by "
        "the language model where the app has one, else left out and said so)",
    )
    seed: int | None = Field(
        None, ge=0, le=2**31 - 1, description="the first candidate's seed (the next ones count up); default: drawn"
    )
    count: int = Field(
        1,
        ge=1,
        le=MAX_COUNT,
        description="candidates rendered together (seeds seed, seed+1, ...): the one most like the person is returned",
    )
    width: int | None = Field(
        None, ge=MIN_SIDE_PX, le=MAX_SIDE_PX, multiple_of=SIDE_MULTIPLE_PX, description="default: the style's"
    )
    height: int | None = Field(
        None, ge=MIN_SIDE_PX, le=MAX_SIDE_PX, multiple_of=SIDE_MULTIPLE_PX, description="default: the style's"
    )
    steps: int | None = Field(None, ge=1, le=60, description="sampling steps; default: the style's")
    hires: bool = Field(
        False,
        description="Hires. fix: upscale the render 1.5x (Real-ESRGAN where present) and redraw it at strength 0.4",
    )
    likeness: float | None = Field(
        None, ge=0.0, le=1.5, description="the IP-Adapter's weight on the person's face; default: the style's"
    )
    keep_face: bool = Field(
        True,
        description="paste the person's own face (aligned from the photo) over the generated one, so the result is "
        "them; false: the generated face only",
    )
    min_identity: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="the lowest similarity to the photo's face a result may have (the identity judge's scale); a "
        "candidate below it is redrawn with the next seeds, once, then refused (422 identity_changed). Default: "
        "the judge's own same-person bar",
    )
    format: Literal["auto", "jpeg", "png", "webp"] = Field("auto", description="auto: JPEG for JPEG input, else PNG")
