"""The whole pipeline graph in one ``bind`` expression. ``serve run configs/local.yaml`` imports ``build_app``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from ray.serve import Application

from deployments.faces.deployment import FaceAnalyzer
from serve_app.ingress import Ingress


class AppArgs(BaseModel):
    """Arguments from the Serve YAML's ``args:`` section (deployment options go in its ``deployments:`` list)."""

    model_config = ConfigDict(extra="forbid")


def build_app(args: dict[str, Any] | None = None) -> Application:
    AppArgs.model_validate(args or {})
    return Ingress.bind(FaceAnalyzer.bind())
