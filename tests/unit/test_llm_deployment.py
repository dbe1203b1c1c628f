"""The LLM deployment of GPU configs (``configs/gpu-llm.yaml``), checked without vLLM: its ``args.llm`` is our model
of ``ray.serve.llm``'s config, the deployment is configured beside everything ``configs/gpu.yaml`` deploys, and
``build_app`` binds it into the one application when the ``.[llm]`` extra is there, and says what to install when
it is not. Nothing in the base or test install imports ``ray.serve.llm`` (it needs pyarrow and vLLM)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import types
from pathlib import Path

import pytest
import yaml
from ray import serve
from ray.serve._private.build_app import build_app as build_serve_app
from ray.serve.schema import ServeDeploySchema

from deployments.common.errors import InvalidParameter
from deployments.common.weights import load_manifest
from serve_app.app import AppArgs, build_app
from serve_app.llm import DEFAULT_LLM, LLM_DEPLOYMENT, LlmDeploymentArgs

REPO_ROOT = Path(__file__).resolve().parents[2]
GPU_LLM = REPO_ROOT / "configs" / "gpu-llm.yaml"


def _application(path: Path) -> dict:
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    ServeDeploySchema.model_validate(raw)
    [application] = raw["applications"]
    return application


def test_the_gpu_llm_config_parses_into_our_args():
    args = AppArgs.model_validate(_application(GPU_LLM)["args"])
    assert isinstance(args.llm, LlmDeploymentArgs) and args.llm.model_id == DEFAULT_LLM == "Qwen/Qwen3-VL-8B-Instruct"
    assert args.instructions.interpreter == "llm" and args.llm_route.deployment is args.llm
    config = args.llm.llm_config()
    assert config["model_loading_config"] == {"model_id": DEFAULT_LLM, "model_source": DEFAULT_LLM}
    gpu_share = config["placement_group_config"]["bundle_per_worker"]["GPU"]
    assert 0 < gpu_share < 1  # fractional: the image models share the card
    assert 0 < config["engine_kwargs"]["gpu_memory_utilization"] <= gpu_share  # within its share of the memory too


def test_the_llm_deployment_is_configured_beside_what_the_gpu_config_deploys():
    """gpu-llm.yaml is gpu.yaml plus the language model: the same entries otherwise, so the two stay in step."""
    gpu = {d["name"]: d for d in _application(REPO_ROOT / "configs" / "gpu.yaml")["deployments"]}
    llm = {d["name"]: d for d in _application(GPU_LLM)["deployments"]}
    assert set(llm) == set(gpu) | {LLM_DEPLOYMENT}
    assert {name: entry for name, entry in llm.items() if name != LLM_DEPLOYMENT} == gpu
    assert llm[LLM_DEPLOYMENT]["autoscaling_config"]["min_replicas"] >= 1  # a cold 8B model takes minutes


def test_the_configured_models_are_in_the_manifest_and_not_pulled_by_default():
    manifest = load_manifest(REPO_ROOT / "configs" / "models.yaml")
    repos = {spec.repo: spec for spec in manifest.values() if spec.repo}
    model = AppArgs.model_validate(_application(GPU_LLM)["args"]).llm.model_id
    assert repos[model].license == "Apache-2.0" and repos[model].commercial_use
    assert {"Qwen/Qwen3-VL-4B-Instruct", "Qwen/Qwen3-VL-2B-Instruct"} <= set(repos)


def test_without_the_extra_build_app_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray.serve.llm", None)  # as on a host without ray[llm] (or without pyarrow)
    with pytest.raises(InvalidParameter, match=r"install the optional extra .*pip install -e '\.\[llm\]'"):
        build_app(_application(GPU_LLM)["args"])


def test_with_the_extra_the_llm_deployment_is_bound_into_the_one_application(monkeypatch):
    """A stand-in for ``ray.serve.llm`` records what ``build_app`` asks of it: the LLMConfig of ``args.llm`` and the
    deployment's name; the deployment it returns joins the graph beside the ingress, the stages and the runner."""
    asked = {}

    class LLMConfig:
        def __init__(self, **kwargs):
            asked["config"] = kwargs

    class LLMServer:
        async def chat(self, request):
            yield request

    def build_llm_deployment(config, *, override_serve_options):
        asked["options"] = override_serve_options
        return serve.deployment(LLMServer, name=override_serve_options["name"]).bind()

    fake = types.ModuleType("ray.serve.llm")
    fake.LLMConfig, fake.build_llm_deployment = LLMConfig, build_llm_deployment
    monkeypatch.setitem(sys.modules, "ray.serve.llm", fake)
    args = _application(GPU_LLM)["args"]
    deployments = {d.name for d in build_serve_app(build_app(args), name="portrait").deployments}
    assert {LLM_DEPLOYMENT, "Ingress", "BucketRunner", "ComplianceGate"} <= deployments
    assert asked == {"config": AppArgs.model_validate(args).llm.llm_config(), "options": {"name": LLM_DEPLOYMENT}}


def test_vllm_is_an_optional_extra_nothing_else_imports():
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["optional-dependencies"]["llm"] == ["ray[llm]==2.60.0"]
    others = project["dependencies"] + project["optional-dependencies"]["test"]
    assert not [requirement for requirement in others if "vllm" in requirement or "[llm]" in requirement]
    code = (
        "import sys, serve_app.app, serve_app.ingress; "
        "print(sorted(m for m in ('ray.serve.llm', 'vllm') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "[]"
