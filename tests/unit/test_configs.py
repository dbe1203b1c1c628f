"""Every shipped Serve config is valid and configures exactly the deployments the app builds."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ray.serve._private.build_app import build_app as build_serve_app
from ray.serve.schema import ServeDeploySchema

from serve_app.app import build_app

REPO_ROOT = Path(__file__).resolve().parents[2]
SERVE_CONFIGS = ["configs/local.yaml", "configs/gpu.yaml"]


def _serve_config(relative: str) -> ServeDeploySchema:
    return ServeDeploySchema.model_validate(yaml.safe_load((REPO_ROOT / relative).read_text(encoding="utf-8")))


def _kuberay_config() -> ServeDeploySchema:
    service = yaml.safe_load((REPO_ROOT / "infra" / "kuberay" / "rayservice.yaml").read_text(encoding="utf-8"))
    return ServeDeploySchema.model_validate(yaml.safe_load(service["spec"]["serveConfigV2"]))


@pytest.fixture(scope="module")
def built_deployments() -> set[str]:
    return {deployment.name for deployment in build_serve_app(build_app({}), name="portrait").deployments}


@pytest.mark.parametrize("relative", SERVE_CONFIGS)
def test_serve_config_names_every_deployment(relative, built_deployments):
    [application] = _serve_config(relative).applications
    assert {deployment.name for deployment in application.deployments} == built_deployments


def test_kuberay_service_names_only_real_deployments(built_deployments):
    [application] = _kuberay_config().applications
    assert {deployment.name for deployment in application.deployments} <= built_deployments


def _deployments(relative: str) -> list[dict]:
    """The raw deployment entries (the schema's defaults would hide what the file leaves out)."""
    return yaml.safe_load((REPO_ROOT / relative).read_text(encoding="utf-8"))["applications"][0]["deployments"]


def test_gpu_config_puts_models_on_fractional_gpus_and_lets_them_scale_to_zero():
    gpu = {d["name"]: d for d in _deployments("configs/gpu.yaml") if d.get("ray_actor_options", {}).get("num_gpus")}
    assert set(gpu) == {
        "FaceRestorerGFPGAN",
        "FaceRestorerCodeFormer",
        "FaceRestorer512",
        "FaceRestorer256",
        "BackgroundUpscaler",
        "CartoonHead",
        "CartoonBackground",
    }
    for deployment in gpu.values():
        assert 0 < deployment["ray_actor_options"]["num_gpus"] < 1
        assert deployment["autoscaling_config"]["min_replicas"] == 0
        assert deployment["max_ongoing_requests"] >= deployment["user_config"]["max_batch_size"]


def test_local_config_fits_a_two_core_machine():
    cpus = [d.get("ray_actor_options", {}).get("num_cpus", 1) for d in _deployments("configs/local.yaml")]
    assert sum(cpus) <= 2
