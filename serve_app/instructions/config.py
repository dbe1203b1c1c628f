"""How plain-language requests are read, as the Serve YAML's ``args: {instructions: ...}`` writes it."""

from __future__ import annotations

from ipaddress import IPv4Network, IPv6Network
from typing import Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

RULES_DEADLINE_S = 2.0  # the worst 2000-character prompt reads in under 0.1 s (docs/BENCHMARKS.md)


class LlmOptions(BaseModel):
    """An OpenAI-compatible chat endpoint: a vLLM server (``vllm serve MODEL``) or a ``ray.serve.llm`` app."""

    model_config = ConfigDict(extra="forbid", frozen=True, protected_namespaces=())

    base_url: str = Field(description="the endpoint's /v1 root, e.g. http://127.0.0.1:8001/v1")
    model: str = Field(description="the model name the endpoint serves, e.g. Qwen/Qwen2.5-1.5B-Instruct")
    timeout_s: float = Field(8.0, gt=0, le=120, description="past this the rules answer instead")
    api_key: SecretStr | None = Field(None, description="sent as a bearer token when set")
    # How the JSON schema is sent: OpenAI's response_format (vLLM supports it), vLLM's guided_json (before 0.12), or
    # vLLM's structured_outputs (0.12 and later).
    structured_output: Literal["response_format", "guided_json", "structured_outputs"] = "response_format"
    max_tokens: int = Field(400, ge=16, le=4096)

    @field_validator("base_url")
    @classmethod
    def _http(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL, got {value!r}")
        return value.rstrip("/")


class InstructionsConfig(BaseModel):
    """The interpreter that reads prompts, and which remote images the OpenAI-compatible chat route may fetch.

    ``interpreter`` was called ``engine`` before; a YAML that still says ``engine: llm`` loads the same (but not both
    keys at once). "Engine" is the image engine that ran a job (``X-Portrait-Engine``), a different thing."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    interpreter: Literal["rules", "llm"] = Field("rules", validation_alias=AliasChoices("interpreter", "engine"))
    llm: LlmOptions | None = None
    # The rules read a prompt in a worker thread; past this the route answers 503 (they take milliseconds).
    rules_deadline_s: float = Field(RULES_DEADLINE_S, gt=0, le=30)
    # Hosts whose http(s) image URLs the chat route fetches; empty (the default) accepts data: URLs only, "*" any host.
    image_url_hosts: tuple[str, ...] = ()
    # Ports beside 80 and 443 a fetch may connect to, and non-global networks it may reach (an in-house image store);
    # every other address a host resolves to (loopback, private, link-local...) is refused (serve_app.remote_images).
    image_url_ports: tuple[int, ...] = ()
    image_url_networks: tuple[IPv4Network | IPv6Network, ...] = ()
    image_fetch_timeout_s: float = Field(10.0, gt=0, le=120, description="one deadline for the whole fetch")

    @model_validator(mode="before")
    @classmethod
    def _one_name_for_the_interpreter(cls, data: object) -> object:
        if isinstance(data, dict) and "interpreter" in data and "engine" in data:
            raise ValueError("interpreter and engine (its old name) are one setting: write interpreter only")
        return data

    @model_validator(mode="after")
    def _llm_needs_options(self) -> InstructionsConfig:
        if self.interpreter == "llm" and self.llm is None:
            raise ValueError("interpreter: llm needs an llm section (base_url, model)")
        return self
