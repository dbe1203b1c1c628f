"""Process settings of the edge (environment, prefix ``PORTRAIT_``); per-deployment tunables live in the Serve YAML.

``Settings`` extends the model store settings the deployments read (``deployments.common.settings``), so one object
describes the whole process and each field is declared once.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field, SecretStr

from deployments.common.image import DEFAULT_MAX_BYTES, DEFAULT_MAX_PIXELS
from deployments.common.settings import REPO_ROOT, ModelSettings


class Settings(ModelSettings):
    """Input limits, the events token, bucket roots and the request timeout, beside the model store."""

    id_specs: Path = REPO_ROOT / "configs" / "id_specs.yaml"
    max_image_bytes: int = Field(DEFAULT_MAX_BYTES, gt=0)
    max_image_pixels: int = Field(DEFAULT_MAX_PIXELS, gt=0)
    request_timeout_s: float = Field(
        120.0, gt=0, description="a job route answers 504 `timeout` after this; keep Serve's proxy timeout above it"
    )
    health_timeout_s: float = Field(
        2.0, gt=0, le=30, description="/healthz answers within this, whatever the deployments do"
    )
    events_token: SecretStr | None = Field(None, description="bearer token POST /v1/events/s3 requires, when set")
    buckets_root: Path | None = Field(
        None,
        description="absolute base of relative local-folder bucket routes; required on a multi-node cluster "
        "(default on one node: the working directory)",
    )


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
