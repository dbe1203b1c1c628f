"""The whole pipeline graph in one ``bind`` expression. ``serve run configs/local.yaml`` imports ``build_app``."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from ray.serve import Application

from deployments.common.settings import get_model_settings
from deployments.common.stage import StageContext
from deployments.common.weights import load_manifest
from deployments.restore.params import RESTORE_MODELS
from serve_app.auth import AuthConfig
from serve_app.ingress import Ingress
from serve_app.instructions import InstructionsConfig
from serve_app.runner.deployment import BucketRunner
from serve_app.runner.jobs_config import JobsConfig
from serve_app.stages import bindings


class AppArgs(BaseModel):
    """Arguments from the Serve YAML's ``args:`` section (deployment options go in its ``deployments:`` list)."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    # The restorers to deploy, in order of preference: a request without `model` gets the first whose weights load.
    restore_models: list[Literal[RESTORE_MODELS]] = Field(default_factory=lambda: list(RESTORE_MODELS), min_length=1)
    # The bucket-event trigger (webhook, SQS, poller); its routes live in the BucketRunner user_config.
    bucket_runner: bool = True
    # Plain-language requests (/v1/instructions, the OpenAI-compatible routes): the rule engine, or a language model
    # behind an OpenAI-compatible endpoint ({engine: llm, llm: {base_url, model, timeout_s}}); docs/compatibility.md
    # "Ask in words".
    instructions: InstructionsConfig = Field(default_factory=InstructionsConfig)
    # API keys ({keys: [{id, sha256, rate_per_s, burst, daily_quota, tasks, callback_secret}], keys_file});
    # docs/operations.md "Keys and quotas". Without keys every route is open, as on a laptop.
    auth: AuthConfig = Field(default_factory=AuthConfig)
    # Asynchronous jobs (/v1/jobs; they run in the bucket runner): {store, retention_s, max_queued, max_queued_per_key,
    # open_beyond_loopback, callback_secret, callback_hosts, ...}; docs/buckets-and-jobs.md "Asynchronous jobs".
    jobs: JobsConfig = Field(default_factory=JobsConfig)


def build_app(args: dict[str, Any] | None = None) -> Application:
    options = AppArgs.model_validate(args or {})
    context = StageContext(load_manifest(get_model_settings().models_manifest), tuple(options.restore_models))
    # Every declared model stage, once; the ingress and the bucket runner share them (Serve passes each as its handle).
    stages = {name: deployment.options(name=name).bind(name, *init) for name, deployment, init in bindings(context)}
    runner = BucketRunner.bind(stages=stages, jobs=options.jobs, auth=options.auth) if options.bucket_runner else None
    return Ingress.bind(
        stages=stages, bucket_runner=runner, instructions=options.instructions, auth=options.auth, jobs=options.jobs
    )
