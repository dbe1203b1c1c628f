"""The whole pipeline graph in one ``bind`` expression. ``serve run configs/local.yaml`` imports ``build_app``."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from ray.serve import Application

from deployments.faces.deployment import FaceAnalyzer
from deployments.idphoto.deployment import PortraitMatter
from deployments.restore.deployment import FaceRestorer
from deployments.restore.params import RESTORE_MODELS
from serve_app.ingress import Ingress

# Deployment names the Serve YAML configures, one per restoration model.
RESTORER_DEPLOYMENTS = {"gpen-bfr-512": "FaceRestorer512", "gpen-bfr-256": "FaceRestorer256"}


class AppArgs(BaseModel):
    """Arguments from the Serve YAML's ``args:`` section (deployment options go in its ``deployments:`` list)."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    restore_models: list[Literal[RESTORE_MODELS]] = Field(default_factory=lambda: list(RESTORE_MODELS))


def build_app(args: dict[str, Any] | None = None) -> Application:
    options = AppArgs.model_validate(args or {})
    restorers = {
        model: FaceRestorer.options(name=RESTORER_DEPLOYMENTS[model]).bind(model) for model in options.restore_models
    }
    return Ingress.bind(FaceAnalyzer.bind(), PortraitMatter.bind(), restorers)
