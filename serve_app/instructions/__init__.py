"""Plain-language requests ("蓝底一寸证件照", "restore this and upscale 2x") turned into one job with valid params.

Two engines behind one interface (:class:`InstructionEngine`): the rule engine (``rules.py``, the default: no model,
deterministic, its vocabulary built from the presets, styles and parameter models) and a language model behind any
OpenAI-compatible endpoint (``llm.py``), which falls back to the rules. No Ray here: the HTTP routes, the bucket
routes and the CLI all use it in-process.
"""

from __future__ import annotations

from serve_app.instructions.config import InstructionsConfig, LlmOptions
from serve_app.instructions.interface import (
    MAX_PROMPT_CHARS,
    Instruction,
    InstructionEngine,
    InstructionUnclear,
    JobHint,
    PromptTooLong,
    check_prompt,
)
from serve_app.instructions.llm import LlmEngine
from serve_app.instructions.rules import RuleEngine
from serve_app.instructions.vocabulary import build_vocabulary
from serve_app.jobs import JobContext

__all__ = [
    "MAX_PROMPT_CHARS",
    "Instruction",
    "InstructionEngine",
    "InstructionUnclear",
    "InstructionsConfig",
    "JobHint",
    "LlmEngine",
    "LlmOptions",
    "PromptTooLong",
    "RuleEngine",
    "build_engine",
    "check_prompt",
    "rule_engine",
]


def rule_engine(context: JobContext) -> RuleEngine:
    return RuleEngine(build_vocabulary(context), context)


def build_engine(config: InstructionsConfig, context: JobContext) -> InstructionEngine:
    """The engine ``config`` asks for; the language model always has the rules behind it."""
    vocabulary = build_vocabulary(context)
    rules = RuleEngine(vocabulary, context)
    if config.engine == "llm" and config.llm is not None:
        return LlmEngine(config.llm, rules, vocabulary, context)
    return rules
