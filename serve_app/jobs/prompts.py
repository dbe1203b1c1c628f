"""The caller's words in the diffusion models' language: the text encoders of SDXL and InstructPix2Pix read English,
our users mostly write Chinese. The app's language model rewrites them where there is one; the refusal policy reads
the rewrite too (``deployments/edit/words.py``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import BaseModel, Field, ValidationError

from deployments.edit.words import refuse_edit
from serve_app.backend import Backend
from serve_app.llm import LlmFailure

_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
REWRITE_SYSTEM = (
    "You turn a user's words about a photo, in any language, into a short English phrase for an image model: "
    "{what}, at most 40 words. Describe only what is asked; never nudity, never a change of the person's age, "
    "ethnicity or identity. Answer JSON."
)


class _Rewritten(BaseModel):
    prompt: str = Field(max_length=400)


@dataclass(frozen=True)
class EnglishPrompt:
    """The words as the model will read them (None: left out), and what was done to them (None: nothing)."""

    text: str | None
    note: str | None = None


async def english_prompt(backend: Backend, words: str, what: str) -> EnglishPrompt:
    """``words`` as they are when they hold no Chinese; else the language model's English (``what``: the kind of
    phrase the model wants), or left out where there is no model or it failed, and the note says which."""
    if not _CJK.search(words):
        return EnglishPrompt(words)
    if backend.llm is None:
        return EnglishPrompt(None, "the prompt's Chinese words were left out: no language model to rewrite them")
    messages = [
        {"role": "system", "content": REWRITE_SYSTEM.format(what=what)},
        {"role": "user", "content": words},
    ]
    try:
        answer = await backend.llm.ask_json(messages, _Rewritten.model_json_schema(), schema_name="prompt")
        rewritten = _Rewritten.model_validate(answer)
    except (LlmFailure, ValidationError) as exc:
        return EnglishPrompt(None, f"the prompt's Chinese words were left out: the language model failed ({exc})")
    refuse_edit(rewritten.prompt)
    return EnglishPrompt(rewritten.prompt, f"rewritten by {backend.llm.model}")
