"""Every shipped Serve config is valid and configures exactly the deployments the app builds."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ray.serve._private.build_app import build_app as build_serve_app
from ray.serve.schema import ServeDeploySchema

from deployments.cartoon.types import CARTOON_DEPLOYMENTS
from deployments.common.weights import load_manifest
from deployments.restore.params import restorer_deployment, restorer_specs
from serve_app.app import build_app
from serve_app.settings import Settings

REPO_ROOT = Path(__file__).resolve().parents[2]
SERVE_CONFIGS = ["configs/local.yaml", "configs/gpu.yaml", "configs/cluster-cpu.yaml"]
KUBERAY = "infra/kuberay/rayservice.yaml"
# Configs for a cluster of several nodes: none may have a single point of failure.
CLUSTER_CONFIGS = ["configs/gpu.yaml", "configs/cluster-cpu.yaml", KUBERAY]
TRIGGERS = {"BucketRunner"}  # one replica by design: it owns the poller; a replacement skips recorded objects


def _serve_config(relative: str) -> ServeDeploySchema:
    return ServeDeploySchema.model_validate(yaml.safe_load((REPO_ROOT / relative).read_text(encoding="utf-8")))


def _kuberay_service() -> dict:
    return yaml.safe_load((REPO_ROOT / KUBERAY).read_text(encoding="utf-8"))


def _raw_config(relative: str) -> dict:
    """A Serve config as written (the schema's defaults would hide what the file leaves out)."""
    if relative == KUBERAY:
        return yaml.safe_load(_kuberay_service()["spec"]["serveConfigV2"])
    return yaml.safe_load((REPO_ROOT / relative).read_text(encoding="utf-8"))


def _kuberay_config() -> ServeDeploySchema:
    return ServeDeploySchema.model_validate(_raw_config(KUBERAY))


@pytest.fixture(scope="module")
def built_deployments() -> set[str]:
    return {deployment.name for deployment in build_serve_app(build_app({}), name="portrait").deployments}


@pytest.mark.parametrize("relative", SERVE_CONFIGS)
def test_serve_config_names_every_deployment(relative, built_deployments):
    [application] = _serve_config(relative).applications
    assert {deployment.name for deployment in application.deployments} == built_deployments


def test_kuberay_service_names_every_deployment(built_deployments):
    [application] = _kuberay_config().applications
    assert {deployment.name for deployment in application.deployments} == built_deployments


def test_kuberay_service_deploys_what_the_gpu_config_does():
    assert _deployments(KUBERAY) == _deployments("configs/gpu.yaml")


def _deployments(relative: str) -> list[dict]:
    """The raw deployment entries."""
    return _raw_config(relative)["applications"][0]["deployments"]


def _fewest_replicas(deployment: dict) -> int:
    autoscaling = deployment.get("autoscaling_config")
    return autoscaling["min_replicas"] if autoscaling else deployment.get("num_replicas", 1)


@pytest.mark.parametrize("relative", CLUSTER_CONFIGS)
def test_losing_any_node_leaves_a_replica_of_every_cpu_stage(relative):
    """Two replicas at least of the ingress and of every CPU stage, at most one per node; GPU models may scale to zero
    (a request then waits for a replica within the request timeout); the trigger runs once."""
    cpu_stages = [
        d for d in _deployments(relative) if not d["ray_actor_options"].get("num_gpus") and d["name"] not in TRIGGERS
    ]
    assert "Ingress" in {d["name"] for d in cpu_stages}
    for deployment in cpu_stages:
        assert _fewest_replicas(deployment) >= 2, deployment["name"]
        assert deployment.get("max_replicas_per_node") == 1, deployment["name"]
    for deployment in _deployments(relative):
        if deployment["name"] in TRIGGERS:
            assert deployment["num_replicas"] == 1 and "autoscaling_config" not in deployment


@pytest.mark.parametrize("relative", CLUSTER_CONFIGS)
def test_every_node_has_a_proxy_and_no_request_waits_without_bound(relative):
    config = _raw_config(relative)
    assert config["proxy_location"] == "EveryNode"
    env = config["applications"][0].get("runtime_env", {}).get("env_vars", {})
    app_timeout_s = float(env.get("PORTRAIT_REQUEST_TIMEOUT_S", Settings.model_fields["request_timeout_s"].default))
    # The app answers 504 JSON first; the proxy's timeout (408) is the backstop for a lost ingress replica.
    assert app_timeout_s < config["http_options"]["request_timeout_s"] <= app_timeout_s + 30


def test_the_cpu_cluster_config_runs_as_two_one_cpu_nodes():
    """bench/cluster_fault.py runs it on one 2-core machine: each node holds one replica of every deployment."""
    deployments = _deployments("configs/cluster-cpu.yaml")
    assert not any(d["ray_actor_options"].get("num_gpus") for d in deployments)
    per_node = sum(d["ray_actor_options"]["num_cpus"] for d in deployments)
    assert per_node <= 0.5


def test_the_kuberay_head_survives_restarts_and_serves_nothing_itself():
    cluster = _kuberay_service()["spec"]["rayClusterConfig"]
    assert cluster["gcsFaultToleranceOptions"]["redisAddress"]
    assert cluster["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0"
    groups = {group["groupName"]: group for group in cluster["workerGroupSpecs"]}
    assert groups["cpu"]["minReplicas"] >= 2


def test_every_kuberay_worker_takes_the_events_token_from_a_secret():
    """The ingress listens on 0.0.0.0 there, so it starts the bucket webhook only with PORTRAIT_EVENTS_TOKEN."""
    for group in _kuberay_service()["spec"]["rayClusterConfig"]["workerGroupSpecs"]:
        [container] = group["template"]["spec"]["containers"]
        env = {variable["name"]: variable for variable in container.get("env", [])}
        assert env["PORTRAIT_EVENTS_TOKEN"]["valueFrom"]["secretKeyRef"] == {
            "name": "portrait-serve",
            "key": "events-token",
        }


def test_gpu_config_puts_models_on_fractional_gpus_and_lets_them_scale_to_zero():
    gpu = {d["name"]: d for d in _deployments("configs/gpu.yaml") if d.get("ray_actor_options", {}).get("num_gpus")}
    restorers = {restorer_deployment(spec) for spec in restorer_specs(load_manifest(Settings().models_manifest))}
    assert set(gpu) >= restorers | {"BackgroundUpscaler", "Colorizer", *CARTOON_DEPLOYMENTS.values()}
    for deployment in gpu.values():
        assert 0 < deployment["ray_actor_options"]["num_gpus"] < 1
        assert deployment["autoscaling_config"]["min_replicas"] == 0
        assert deployment["max_ongoing_requests"] >= deployment["user_config"]["max_batch_size"]


def test_local_config_fits_a_two_core_machine():
    cpus = [d.get("ray_actor_options", {}).get("num_cpus", 1) for d in _deployments("configs/local.yaml")]
    assert sum(cpus) <= 2
