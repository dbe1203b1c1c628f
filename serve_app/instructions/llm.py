"""The language-model interpreter: the app's language model (``serve_app.llm``: an OpenAI-compatible endpoint, or the
LLM deployment by handle) asked for one JSON object that must validate against the chosen job's own parameter model;
the rules answer whenever it cannot.

The JSON schema sent with the request is built from the same parameter models as the job routes (with the presets
and styles this service has as ``enum``s), so a structured-output server (vLLM's guided decoding) can only produce
a well-formed answer; the answer is still validated here, because not every endpoint enforces the schema. Any
failure (unreachable, an HTTP error, past ``timeout_s``, not JSON, params the job refuses, "unclear") falls back
to the rule interpreter, and the answer's ``engine`` (the interpreter's wire name: ``rules-fallback``) and first note
say why.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Mapping
from typing import Any

from deployments.common.errors import InvalidParameter
from serve_app.instructions.interface import Instruction, InstructionUnclear, JobHint, check_prompt
from serve_app.instructions.rules import RuleInterpreter
from serve_app.instructions.vocabulary import Vocabulary
from serve_app.jobs import JobContext, parse_job_params
from serve_app.llm import LlmClient, LlmFailure, LlmOptions
from serve_app.registry import JOB_ENTRIES

logger = logging.getLogger(__name__)

INTERPRETER = "llm"
FALLBACK_INTERPRETER = "rules-fallback"
UNCLEAR = "unclear"
_NOT_ASKED = ("return",)  # how the answer travels is the caller's choice, not the prompt's


class LlmInterpreter:
    """``llm``: the client (or an endpoint's options, for a client over HTTP)."""

    name = INTERPRETER

    def __init__(
        self, llm: LlmClient | LlmOptions, rules: RuleInterpreter, vocabulary: Vocabulary, context: JobContext
    ) -> None:
        self._llm = llm if isinstance(llm, LlmClient) else LlmClient.over_http(llm)
        self._rules = rules
        self._vocabulary = vocabulary
        self._context = context

    async def interpret(self, prompt: str, hint: JobHint | None = None) -> Instruction:
        text = check_prompt(prompt)
        try:
            answer = await self._ask(text, hint)
            return self._instruction(answer, hint)
        except LlmFailure as exc:
            reason = str(exc)
        logger.warning("language model %s failed (%s): the rules answer", self._llm.model, reason)
        why = f"language model {self._llm.model} failed ({reason}): answered by the rules"
        try:
            fallback = await self._rules.interpret(text, hint)
        except InstructionUnclear as exc:
            raise InstructionUnclear(f"{exc.message} ({why})", details={**exc.details, "llm_error": reason}) from None
        return dataclasses.replace(fallback, interpreter=FALLBACK_INTERPRETER, notes=(why, *fallback.notes))

    def answer_schema(self, hint: JobHint | None = None) -> dict[str, Any]:
        """One object per job (``{"task": job, "params": {...}}``) or ``{"task": "unclear", "reason": "..."}``."""
        tasks = [hint.task] if hint else list(self._vocabulary.tasks)
        branches = [
            {
                "type": "object",
                "properties": {"task": {"const": task}, "params": self._params_schema(task)},
                "required": ["task", "params"],
                "additionalProperties": False,
            }
            for task in tasks
        ]
        branches.append(
            {
                "type": "object",
                "properties": {"task": {"const": UNCLEAR}, "reason": {"type": "string"}},
                "required": ["task", "reason"],
                "additionalProperties": False,
            }
        )
        return {"anyOf": branches}

    def system_prompt(self, hint: JobHint | None = None) -> str:
        specs = "; ".join(
            f"{slug} = {spec.name} / {spec.name_en}" + (f" ({', '.join(spec.aliases)})" if spec.aliases else "")
            for slug, spec in self._context.id_specs.items()
        )
        steps = [entry.name for entry in JOB_ENTRIES if entry.step_of is not None]
        lines = [
            "You turn a user's request about a portrait photo into one job for an image service. Answer with one JSON "
            'object only, following the schema: {"task": job, "params": {...}}, or {"task": "unclear", '
            '"reason": "..."} when the request names no job or several. Never guess a job.',
            "Jobs: " + "; ".join(f"{entry.name} = {entry.prompt_hint}" for entry in JOB_ENTRIES) + ".",
            f"Choose a step ({', '.join(steps)}) only when the request names that step alone; a request for the "
            "whole result (an ID photo in blue, one inch...) is the whole job, even with options a step also takes.",
            "Put in params only the options the user asked for; leave everything else out.",
            f"ID-photo presets (idphoto spec): {specs}.",
            f"Cartoon styles: {', '.join(self._context.cartoon_styles)}.",
            f"Words people use for options (word = option value): {self._option_words()}.",
            "File size: 不超过50KB = max_kb 50; 20-50KB = min_kb 20 and max_kb 50. Upscale: 放大两倍 = upscale 2.",
        ]
        if hint:
            lines.append(f"The user already chose the job {hint.task}; answer with that job.")
        return "\n".join(lines)

    def _option_words(self) -> str:
        """The first word the vocabulary has for each option value (蓝底 = background blue)."""
        words: dict[tuple[str, str], str] = {}
        for phrase in self._vocabulary.phrases:
            if len(phrase.values) == 1 and not phrase.weak:
                [(name, value)] = phrase.values.items()
                if name not in ("spec", "style", "model"):
                    words.setdefault((name, json.dumps(value) if isinstance(value, bool) else str(value)), phrase.text)
        return "; ".join(f"{text} = {name} {value}" for (name, value), text in words.items())

    def _params_schema(self, task: str) -> dict[str, Any]:
        schema = self._vocabulary.models[task].model_json_schema(by_alias=True)
        properties = {name: value for name, value in schema.get("properties", {}).items() if name not in _NOT_ASKED}
        choices = {"spec": sorted(self._context.id_specs), "style": list(self._context.cartoon_styles)}
        for name, values in choices.items():
            if name in properties:
                properties[name] = {"enum": values, "description": properties[name].get("description", name)}
        return {"type": "object", "properties": properties, "additionalProperties": False}

    async def _ask(self, prompt: str, hint: JobHint | None) -> Any:
        """One chat completion, its message content parsed as JSON (``LlmFailure`` when there is none)."""
        messages = [{"role": "system", "content": self.system_prompt(hint)}, {"role": "user", "content": prompt}]
        return await self._llm.ask_json(messages, self.answer_schema(hint), schema_name="portrait_job")

    def _instruction(self, answer: Any, hint: JobHint | None) -> Instruction:
        if not isinstance(answer, Mapping) or not isinstance(answer.get("task"), str):
            raise LlmFailure("the model's answer has no task")
        task = answer["task"]
        if task == UNCLEAR:
            raise LlmFailure(f"the model found no single job: {answer.get('reason', '')}")
        if task not in self._vocabulary.models:
            raise LlmFailure(f"the model named an unknown job {task!r}")
        if hint is not None and task != hint.task:
            raise LlmFailure(f"the model chose job {task}, the caller {hint.task}")
        params = answer.get("params", {})
        if not isinstance(params, Mapping):
            raise LlmFailure("the model's params are not an object")
        fields = {**(hint.params if hint else {}), **self._asked(task, params)}
        try:
            validated = parse_job_params(task, fields, self._context)
        except InvalidParameter as exc:
            raise LlmFailure(f"the model's params are invalid: {exc.message}") from None
        return Instruction(task=task, params=validated, interpreter=INTERPRETER, notes=(f"read by {self._llm.model}",))

    def _asked(self, task: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """Leave out what a model fills in without being asked: values equal to the default, nulls, ``return``."""
        fields = self._vocabulary.models[task].model_fields
        return {
            name: value
            for name, value in params.items()
            if name not in _NOT_ASKED and value is not None and not (name in fields and fields[name].default == value)
        }
