"""Process-wide settings from the environment (prefix ``PORTRAIT_``); per-deployment tunables live in the Serve YAML."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from deployments.common.image import DEFAULT_MAX_BYTES, DEFAULT_MAX_PIXELS
from deployments.common.weights import ModelStore, load_manifest

REPO_ROOT = Path(__file__).resolve().parents[1]


class Settings(BaseSettings):
    """``PORTRAIT_MODEL_STORE=s3://models/portrait`` and friends; see the README's configuration table."""

    model_config = SettingsConfigDict(env_prefix="PORTRAIT_", protected_namespaces=())

    model_store: str = Field(str(REPO_ROOT / "models"), description="folder or s3://bucket/prefix holding weights")
    model_cache_dir: Path | None = Field(None, description="local mirror of an s3:// model store")
    models_manifest: Path = REPO_ROOT / "configs" / "models.yaml"
    id_specs: Path = REPO_ROOT / "configs" / "id_specs.yaml"
    max_image_bytes: int = Field(DEFAULT_MAX_BYTES, gt=0)
    max_image_pixels: int = Field(DEFAULT_MAX_PIXELS, gt=0)
    request_timeout_s: float = Field(120.0, gt=0)
    events_token: SecretStr | None = Field(None, description="bearer token POST /v1/events/s3 requires, when set")
    buckets_root: Path | None = Field(None, description="base of relative local-folder bucket routes (default: cwd)")

    def open_model_store(self) -> ModelStore:
        return ModelStore(self.model_store, load_manifest(self.models_manifest), cache_dir=self.model_cache_dir)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
