"""How plain-language requests are read, as the Serve YAML's ``args: {instructions: ...}`` writes it."""

from __future__ import annotations

from ipaddress import IPv4Network, IPv6Network
from typing import Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

from serve_app.llm.config import LlmOptions

__all__ = ["RULES_DEADLINE_S", "InstructionsConfig", "LlmOptions"]

RULES_DEADLINE_S = 2.0  # the worst 2000-character prompt reads in under 0.1 s (docs/BENCHMARKS.md)


class InstructionsConfig(BaseModel):
    """The interpreter that reads prompts, and which remote images the OpenAI-compatible chat route may fetch.

    ``interpreter`` was called ``engine`` before; a YAML that still says ``engine: llm`` loads the same (but not both
    keys at once). "Engine" is the image engine that ran a job (``X-Portrait-Engine``), a different thing."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    interpreter: Literal["rules", "llm"] = Field("rules", validation_alias=AliasChoices("interpreter", "engine"))
    # The endpoint of ``interpreter: llm`` (and of the compliance gate's verdicts); without it, the app's LLM
    # deployment (``args.llm``). ``AppArgs`` refuses ``interpreter: llm`` with neither.
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
