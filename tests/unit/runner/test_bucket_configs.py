"""Every shipped Serve YAML carries a BucketRunner user_config that passes start-up validation."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from serve_app.runner.config import RunnerConfig
from serve_app.runner.routing import build_routing_table

REPO_ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("name", ["local.yaml", "gpu.yaml"])
def test_shipped_configs_have_valid_runner_settings(name, job_ctx, tmp_path):
    config = yaml.safe_load((REPO_ROOT / "configs" / name).read_text(encoding="utf-8"))
    (runner,) = [d for d in config["applications"][0]["deployments"] if d["name"] == "BucketRunner"]
    assert runner["num_replicas"] == 1  # it owns the poller and the SQS consumer
    settings = RunnerConfig.model_validate(runner["user_config"])
    build_routing_table(settings.routes, job_ctx, base_dir=tmp_path)


def test_the_local_default_route_is_the_laptop_folder_pair(job_ctx, tmp_path):
    config = yaml.safe_load((REPO_ROOT / "configs" / "local.yaml").read_text(encoding="utf-8"))
    (runner,) = [d for d in config["applications"][0]["deployments"] if d["name"] == "BucketRunner"]
    (route,) = build_routing_table(
        RunnerConfig.model_validate(runner["user_config"]).routes, job_ctx, base_dir=tmp_path
    ).routes
    assert (route.input.bucket, route.output.bucket, route.poll) == (
        str(tmp_path / "buckets" / "in"),
        str(tmp_path / "buckets" / "out"),
        True,
    )


def test_an_sqs_visibility_timeout_shorter_than_a_job_is_refused():
    with pytest.raises(ValueError, match="visibility_timeout_s"):
        RunnerConfig.model_validate({"job_timeout_s": 600, "sqs": {"queue_url": "q", "visibility_timeout_s": 300}})
