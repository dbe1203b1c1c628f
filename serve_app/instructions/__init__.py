"""Plain-language requests ("蓝底一寸证件照", "restore this and upscale 2x") turned into one job with valid params.

Two interpreters behind one interface (:class:`InstructionInterpreter`): the rules (``rules.py``, the default: no model,
deterministic, its vocabulary built from the presets, styles and parameter models) and a language model behind any
OpenAI-compatible endpoint (``llm.py``), which falls back to the rules. No Ray here: the HTTP routes, the bucket
routes and the CLI all use it in-process.
"""

from __future__ import annotations

import logging

from serve_app.instructions.config import InstructionsConfig, LlmOptions
from serve_app.instructions.interface import (
    MAX_PROMPT_CHARS,
    Instruction,
    InstructionInterpreter,
    InstructionUnclear,
    JobHint,
    PromptTooLong,
    check_prompt,
)
from serve_app.instructions.llm import LlmInterpreter
from serve_app.instructions.rules import RuleInterpreter
from serve_app.instructions.vocabulary import build_vocabulary
from serve_app.jobs import JobContext
from serve_app.llm import LlmClient

__all__ = [
    "MAX_PROMPT_CHARS",
    "Instruction",
    "InstructionInterpreter",
    "InstructionUnclear",
    "InstructionsConfig",
    "JobHint",
    "LlmInterpreter",
    "LlmOptions",
    "PromptTooLong",
    "RuleInterpreter",
    "build_interpreter",
    "check_prompt",
    "rule_interpreter",
]

logger = logging.getLogger(__name__)


def rule_interpreter(context: JobContext) -> RuleInterpreter:
    return RuleInterpreter(build_vocabulary(context), context)


def build_interpreter(
    config: InstructionsConfig, context: JobContext, llm: LlmClient | None = None
) -> InstructionInterpreter:
    """The interpreter ``config`` asks for (its answers say which read the prompt, under the wire name ``engine``:
    ``rules``, ``llm``, ``rules-fallback``); the language model always has the rules behind it. ``llm``: the app's
    language model (its endpoint or its LLM deployment); without it, ``config.llm``'s endpoint."""
    vocabulary = build_vocabulary(context)
    rules = RuleInterpreter(vocabulary, context, config.rules_deadline_s)
    if config.interpreter == "llm":
        client = llm or (LlmClient.over_http(config.llm) if config.llm is not None else None)
        if client is not None:
            return LlmInterpreter(client, rules, vocabulary, context)
        logger.warning("interpreter: llm, but the app has no language model: the rules read prompts")
    return rules
