"""The language model the app may have: where it is (``config``) and the one client over its two transports
(``client``). No Ray here: the Serve handle's transport is ``serve_app.handles.ServeChatTransport``."""

from __future__ import annotations

from serve_app.llm.client import ChatTransport, HttpTransport, LlmClient, LlmFailure, language_model
from serve_app.llm.config import (
    DEFAULT_LLM,
    LLM_DEPLOYMENT,
    LlmDeploymentArgs,
    LlmOptions,
    LlmRoute,
    StructuredOutput,
)

__all__ = [
    "DEFAULT_LLM",
    "LLM_DEPLOYMENT",
    "ChatTransport",
    "HttpTransport",
    "LlmClient",
    "LlmDeploymentArgs",
    "LlmFailure",
    "LlmOptions",
    "LlmRoute",
    "StructuredOutput",
    "language_model",
]
