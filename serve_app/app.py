"""The whole pipeline graph in one ``bind`` expression. ``serve run configs/local.yaml`` imports ``build_app``."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from ray.serve import Application

from deployments.common.errors import InvalidParameter
from deployments.common.settings import get_model_settings
from deployments.common.stage import StageContext
from deployments.common.weights import load_manifest
from deployments.restore.params import RESTORE_MODELS
from serve_app.auth import AuthConfig
from serve_app.ingress import Ingress
from serve_app.instructions import InstructionsConfig
from serve_app.llm import LLM_DEPLOYMENT, LlmDeploymentArgs, LlmRoute
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
    # ({interpreter: llm}) behind an OpenAI-compatible endpoint ({llm: {base_url, model, timeout_s}}) or the LLM
    # deployment below; docs/compatibility.md "Ask in words".
    instructions: InstructionsConfig = Field(default_factory=InstructionsConfig)
    # The LLM deployment of GPU configs (ray.serve.llm, vLLM; the .[llm] extra): {model_id, model_source,
    # accelerator_type, engine_kwargs, deployment_config, placement_group_config, timeout_s}; configs/gpu-llm.yaml.
    # The instruction interpreter and the compliance gate call it by handle; without it they use instructions.llm's
    # endpoint, or the rules.
    llm: LlmDeploymentArgs | None = None
    # API keys ({keys: [{id, sha256, rate_per_s, burst, daily_quota, tasks, callback_secret_env}], keys_file}; a
    # key's callback_secret itself goes in keys_file: Ray logs these args at import);
    # docs/operations.md "Keys and quotas". Without keys every route is open, as on a laptop.
    auth: AuthConfig = Field(default_factory=AuthConfig)
    # Asynchronous jobs (/v1/jobs; they run in the bucket runner): {store, retention_s, max_queued, max_queued_per_key,
    # open_beyond_loopback, callback_secret_file (or PORTRAIT_CALLBACK_SECRET: never the secret itself here),
    # callback_hosts, callback_concurrency, ...}; docs/buckets-and-jobs.md "Asynchronous jobs".
    jobs: JobsConfig = Field(default_factory=JobsConfig)

    @model_validator(mode="after")
    def _one_language_model(self) -> AppArgs:
        if self.instructions.llm is not None and self.llm is not None:
            raise ValueError(
                "one language model per app: args.llm (the LLM deployment) or args.instructions.llm (an endpoint)"
            )
        if self.instructions.interpreter == "llm" and not self.llm_route.configured:
            raise ValueError(
                "interpreter: llm needs an llm section (args.instructions.llm: base_url, model) or the LLM "
                "deployment (args.llm)"
            )
        return self

    @property
    def llm_route(self) -> LlmRoute:
        return LlmRoute(self.instructions.llm, self.llm)


def build_app(args: dict[str, Any] | None = None) -> Application:
    options = AppArgs.model_validate(args or {})
    context = StageContext(load_manifest(get_model_settings().models_manifest), tuple(options.restore_models))
    # Every declared model stage, once; the ingress and the bucket runner share them (Serve passes each as its handle).
    stages = {name: deployment.options(name=name).bind(name, *init) for name, deployment, init in bindings(context)}
    # The language model: by handle when the app deploys it, else an endpoint (or none); both callers get the same.
    llm = {"llm": build_llm_deployment(options.llm) if options.llm else None, "llm_route": options.llm_route}
    runner = (
        BucketRunner.bind(stages=stages, jobs=options.jobs, auth=options.auth, **llm) if options.bucket_runner else None
    )
    return Ingress.bind(
        stages=stages,
        bucket_runner=runner,
        instructions=options.instructions,
        auth=options.auth,
        jobs=options.jobs,
        **llm,
    )


LLM_EXTRA = "pip install -e '.[llm]'"


def build_llm_deployment(args: LlmDeploymentArgs) -> Application:
    """The LLM deployment (``ray.serve.llm``: vLLM), named ``LanguageModel``, bound into this application and called
    by handle; ``build_openai_app`` is not used, since ``/v1/models`` and ``/v1/chat/completions`` are our routes.
    ``ray.serve.llm`` is imported only here (it needs pyarrow and vLLM: the ``.[llm]`` extra of GPU hosts)."""
    try:
        from ray.serve.llm import LLMConfig
        from ray.serve.llm import build_llm_deployment as build_vllm_deployment
    except ImportError as exc:
        raise InvalidParameter(
            f"args.llm asks for the LLM deployment, which needs ray.serve.llm and vLLM (missing: {exc.name}): "
            f"install the optional extra on the GPU hosts with `{LLM_EXTRA}` (ray[llm] and vllm), or remove args.llm "
            "and use args.instructions.llm (an OpenAI-compatible endpoint) or the rules",
            details={"missing": exc.name, "install": LLM_EXTRA},
        ) from exc
    config = LLMConfig(**args.llm_config())
    return build_vllm_deployment(config, override_serve_options={"name": LLM_DEPLOYMENT})
