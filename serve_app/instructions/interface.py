"""What every instruction interpreter takes and gives: a prompt in, one job with valid params (or a typed refusal)
out."""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from deployments.common.errors import InputError, InvalidParameter
from deployments.common.params import JobParams
from deployments.edit.words import refuse_edit

# An instruction is a sentence or two; anything longer is a pasted document, not a request (and costs the model).
MAX_PROMPT_CHARS = 2000


class InstructionUnclear(InvalidParameter):
    """The prompt names no job, or several: answered 422, never guessed."""

    code = "instruction_unclear"


class PromptTooLong(InputError):
    code = "prompt_too_long"
    http_status = 413


@dataclass(frozen=True)
class JobHint:
    """What the caller already chose besides the prompt: a job, maybe with options (an OpenAI ``model`` id)."""

    task: str
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Instruction:
    """One job, its validated params, which interpreter understood the prompt, and what it understood (for people).

    On the wire (``to_json``, ``InstructionOut``) the interpreter is still ``engine``: clients read that key."""

    task: str
    params: JobParams
    interpreter: str
    notes: tuple[str, ...] = ()

    def fields(self) -> dict[str, Any]:
        """The params as a caller would send them: only what was asked for, so they validate again unchanged."""
        return self.params.model_dump(mode="json", by_alias=True, exclude_unset=True)

    def to_json(self) -> dict[str, Any]:
        return {"task": self.task, "params": self.fields(), "engine": self.interpreter, "notes": list(self.notes)}


class InstructionInterpreter(Protocol):
    """Turns a prompt into an :class:`Instruction`, or raises :class:`InstructionUnclear` / ``InvalidParameter``."""

    async def interpret(self, prompt: str, hint: JobHint | None = None) -> Instruction: ...


def check_prompt(prompt: object) -> str:
    """The prompt, stripped; refuse what is not text, empty, longer than an instruction can be (before or after
    NFKC normalisation), or an edit the policy refuses (``deployments/edit/words.py``)."""
    if not isinstance(prompt, str):
        raise InvalidParameter("prompt must be text", details={"field": "prompt"})
    text = prompt.strip()
    if not text:
        raise InvalidParameter(
            "the prompt is empty: say what you want, e.g. 蓝底一寸证件照 or 'restore this photo and upscale 2x'",
            details={"field": "prompt"},
        )
    # Counted again after NFKC, the form the rules read: one character can become up to 18 (U+FDFA).
    length = len(text) if len(text) > MAX_PROMPT_CHARS else len(unicodedata.normalize("NFKC", text))
    if length > MAX_PROMPT_CHARS:
        raise PromptTooLong(
            f"the prompt has {length} characters (NFKC-normalised); an instruction is at most {MAX_PROMPT_CHARS}",
            details={"field": "prompt", "max_chars": MAX_PROMPT_CHARS},
        )
    refuse_edit(text)  # the edit refusal policy (422 instruction_refused), whichever interpreter reads the prompt
    return text
