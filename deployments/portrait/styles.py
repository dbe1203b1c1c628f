"""Portrait styles as data (``configs/portrait_styles.yaml``): what each style asks the Renderer for. A style added
there is offered with no code change (the ``style`` option, ``GET /v1/portrait/styles``)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from deployments.common.named_entries import load_named_entries
from deployments.render.types import SCHEDULERS, SIDE_MULTIPLE_PX

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_STYLES_PATH = REPO_ROOT / "configs" / "portrait_styles.yaml"
CONDITIONS = ("openpose", "canny")  # what the job can draw from its own analysis (deployments/portrait/conditions.py)
MIN_SIDE_PX = 256
MAX_SIDE_PX = 1536


class PortraitStyle(BaseModel):
    """One style (its fields: the header of ``configs/portrait_styles.yaml``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    title_zh: str = Field(min_length=1)
    title_en: str = Field(min_length=1)
    words: tuple[str, ...] = ()
    prompt: str = Field(min_length=1, max_length=1000)
    negative_prompt: str = Field("", max_length=1000)
    width: int = Field(1024, ge=MIN_SIDE_PX, le=MAX_SIDE_PX, multiple_of=SIDE_MULTIPLE_PX)
    height: int = Field(1024, ge=MIN_SIDE_PX, le=MAX_SIDE_PX, multiple_of=SIDE_MULTIPLE_PX)
    steps: int = Field(30, ge=1, le=80)
    guidance: float = Field(5.5, ge=0.0, le=30.0)
    scheduler: str = "default"
    controlnets: dict[str, float] = Field(default_factory=dict)
    adapter_scale: float = Field(0.6, ge=0.0, le=1.5)
    loras: dict[str, float] = Field(default_factory=dict)

    @field_validator("scheduler")
    @classmethod
    def _known_scheduler(cls, scheduler: str) -> str:
        if scheduler != "default" and scheduler not in SCHEDULERS:
            raise ValueError(f"scheduler must be default or one of {', '.join(SCHEDULERS)}")
        return scheduler

    @field_validator("controlnets")
    @classmethod
    def _known_conditions(cls, controlnets: dict[str, float]) -> dict[str, float]:
        for condition, scale in controlnets.items():
            if condition not in CONDITIONS or not 0.0 <= scale <= 2.0:
                raise ValueError(f"controlnets maps one of {', '.join(CONDITIONS)} to a scale 0..2, not {condition}")
        return controlnets

    def to_json(self) -> dict:
        """``GET /v1/portrait/styles``: the slug, its titles and what it renders."""
        return {
            "name": self.name,
            "title": {"zh": self.title_zh, "en": self.title_en},
            "size": [self.width, self.height],
            "steps": self.steps,
            "controlnets": dict(self.controlnets),
            "loras": dict(self.loras),
        }


def load_styles(path: Path | str = DEFAULT_STYLES_PATH) -> dict[str, PortraitStyle]:
    """Every style of ``path``, validated; a malformed file is refused at start-up naming the file and the reason."""
    return load_named_entries(path, "styles", PortraitStyle, "portrait style")


@functools.cache
def default_styles() -> Mapping[str, PortraitStyle]:
    """The styles shipped in ``configs/portrait_styles.yaml``, loaded once per process."""
    return load_styles(DEFAULT_STYLES_PATH)
