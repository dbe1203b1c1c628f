"""Where the app's language model is, as the Serve YAML's ``args`` write it: an OpenAI-compatible endpoint
(``args.instructions.llm``: a vLLM server, any hosted API) or the LLM deployment of this application
(``args.llm``: ``ray.serve.llm`` running vLLM on a GPU), never both. No Ray here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SecretStr, field_validator

StructuredOutput = Literal["response_format", "guided_json", "structured_outputs"]

# The LLM deployment's name: its Serve YAML entry, its /healthz key (build_llm_deployment would name it after the
# model, which changes with the model).
LLM_DEPLOYMENT = "LanguageModel"
DEFAULT_LLM = "Qwen/Qwen3-VL-8B-Instruct"  # Apache-2.0; Qwen/Qwen3-VL-4B-Instruct and -2B-Instruct are smaller


class LlmOptions(BaseModel):
    """An OpenAI-compatible chat endpoint: a vLLM server (``vllm serve MODEL``) or a ``ray.serve.llm`` app."""

    model_config = ConfigDict(extra="forbid", frozen=True, protected_namespaces=())

    base_url: str = Field(description="the endpoint's /v1 root, e.g. http://127.0.0.1:8001/v1")
    model: str = Field(description="the model name the endpoint serves, e.g. Qwen/Qwen2.5-1.5B-Instruct")
    timeout_s: float = Field(8.0, gt=0, le=120, description="past this the rules answer instead")
    api_key: SecretStr | None = Field(None, description="sent as a bearer token when set")
    # How the JSON schema is sent: OpenAI's response_format (vLLM supports it), vLLM's guided_json (before 0.12), or
    # vLLM's structured_outputs (0.12 and later).
    structured_output: StructuredOutput = "response_format"
    max_tokens: int = Field(400, ge=16, le=4096)

    @field_validator("base_url")
    @classmethod
    def _http(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL, got {value!r}")
        return value.rstrip("/")


class LlmDeploymentArgs(BaseModel):
    """``args.llm``: the LLM deployment bound into this application (GPU configs: ``configs/gpu-llm.yaml``).

    The first fields are ``ray.serve.llm.LLMConfig``'s, passed on unchanged (``llm_config``); the last ones say how
    our callers (the instruction interpreter, the compliance gate) use the model. Needs the ``.[llm]`` extra
    (``ray[llm]``, vLLM) on the GPU hosts; nothing here imports it."""

    model_config = ConfigDict(extra="forbid", frozen=True, protected_namespaces=(), populate_by_name=True)

    model_id: str = Field(DEFAULT_LLM, description="the name callers send as `model`")
    model_source: str | None = Field(
        None, description="where vLLM reads the weights: a Hugging Face repo (default: model_id), a folder, s3://..."
    )
    accelerator_type: str | None = Field(
        None, validation_alias=AliasChoices("accelerator_type", "accelerator"), description="H100, A100, L4... (Ray's)"
    )
    engine_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="vLLM's engine arguments: max_model_len, gpu_memory_utilization..."
    )
    deployment_config: dict[str, Any] = Field(
        default_factory=dict, description="Serve options of the deployment (the YAML's LanguageModel entry wins)"
    )
    placement_group_config: dict[str, Any] | None = Field(
        None, description="the GPU share of each engine worker: {bundle_per_worker: {GPU: 0.5}} for half a GPU"
    )
    runtime_env: dict[str, Any] | None = None
    timeout_s: float = Field(30.0, gt=0, le=300, description="a caller waits this long, then answers without it")
    max_tokens: int = Field(400, ge=16, le=4096)
    structured_output: StructuredOutput = "response_format"

    def llm_config(self) -> dict[str, Any]:
        """The keyword arguments of ``ray.serve.llm.LLMConfig``."""
        config: dict[str, Any] = {
            "model_loading_config": {"model_id": self.model_id, "model_source": self.model_source or self.model_id},
            "engine_kwargs": dict(self.engine_kwargs),
            "deployment_config": dict(self.deployment_config),
        }
        optional = {
            "accelerator_type": self.accelerator_type,
            "placement_group_config": self.placement_group_config,
            "runtime_env": self.runtime_env,
        }
        return config | {key: value for key, value in optional.items() if value is not None}


@dataclass(frozen=True)
class LlmRoute:
    """The app's language model: ``endpoint`` (over HTTP) or ``deployment`` (by handle), or neither."""

    endpoint: LlmOptions | None = None
    deployment: LlmDeploymentArgs | None = None

    def __post_init__(self) -> None:
        if self.endpoint is not None and self.deployment is not None:
            raise ValueError(
                "one language model per app: args.llm (the LLM deployment) or args.instructions.llm (an endpoint), "
                "not both"
            )

    @property
    def configured(self) -> bool:
        return self.endpoint is not None or self.deployment is not None
