"""Records that cross between the cartoon replicas and the ingress (torch-free: the ingress unpickles them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from deployments.common.engine import EngineInfo
from deployments.common.stage import StageCall

ModelKind = Literal["head", "background"]
# The deployment of each kind: its name in the Serve YAMLs, /healthz, metrics and logs.
CARTOON_DEPLOYMENTS: dict[str, str] = {"head": "CartoonHead", "background": "CartoonBackground"}


@dataclass(frozen=True, eq=False)
class ImageToStylize:
    """One image for a style model: a 288 head crop or a prepared whole image (HxWx3 uint8 RGB)."""

    style: str
    image: np.ndarray


@dataclass(frozen=True, eq=False)
class Stylized:
    """The stylized image (same size as the job's), or ``None`` when this style has no model of this kind."""

    image: np.ndarray | None
    engine: EngineInfo


STYLIZE_HEAD: StageCall[ImageToStylize, Stylized] = StageCall(CARTOON_DEPLOYMENTS["head"], "stylize")
STYLIZE_BACKGROUND: StageCall[ImageToStylize, Stylized] = StageCall(CARTOON_DEPLOYMENTS["background"], "stylize")
