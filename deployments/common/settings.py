"""Where the model deployments find their weights: the model store settings (environment, prefix ``PORTRAIT_``)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from deployments.common.weights import ModelStore, load_manifest

REPO_ROOT = Path(__file__).resolve().parents[2]


class ModelSettings(BaseSettings):
    """``PORTRAIT_MODEL_STORE=s3://models/portrait`` and friends; see "Configuration" in docs/operations.md."""

    model_config = SettingsConfigDict(env_prefix="PORTRAIT_", protected_namespaces=())

    model_store: str = Field(str(REPO_ROOT / "models"), description="folder or s3://bucket/prefix holding weights")
    model_cache_dir: Path | None = Field(None, description="local mirror of an s3:// model store")
    models_manifest: Path = REPO_ROOT / "configs" / "models.yaml"
    models_mirror: str | None = Field(
        None, description="replaces every model's download host: files come from <mirror>/<file> (http(s), s3://)"
    )

    def open_model_store(self) -> ModelStore:
        return ModelStore(self.model_store, load_manifest(self.models_manifest), cache_dir=self.model_cache_dir)


@lru_cache(maxsize=1)
def get_model_settings() -> ModelSettings:
    return ModelSettings()
