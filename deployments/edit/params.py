"""Options of the edit job (HTTP form/JSON, bucket metadata, CLI): a text-guided style of a portrait."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from deployments.common.params import JobParams
from deployments.edit.looks import default_looks

# Every look the service offers (``configs/looks.yaml``), read once at import: a look added there is offered with no
# code change.
LOOK_NAMES = tuple(default_looks())
MAX_PROMPT_CHARS = 500
# The editors a caller may name besides the LOOK engine (the default). One word each: every value is also an OpenAI
# model id (``GET /v1/models``) and a word the instruction rules read, so a name like "look" or "edit-..." would catch
# everyday prompts ("make it look like...").
EXTERNAL = "external"  # the operator's OpenAI-compatible /v1/images/edits endpoint (PORTRAIT_EDIT_ENDPOINT_*)
INSTRUCT = "instructpix2pix"  # InstructPix2Pix on SDXL, in the Renderer (the manifest's sdxl-instructpix2pix-768)
FLUX2_KLEIN = "flux2-klein"  # FLUX.2 [klein] 4B, in the Renderer (the manifest's flux2-klein-4b)
NEURAL_EDITORS = (EXTERNAL, INSTRUCT, FLUX2_KLEIN)  # the editors that edit by the words of ``prompt`` alone


class EditParams(JobParams):
    prompt: str | None = Field(
        None,
        max_length=MAX_PROMPT_CHARS,
        description="what the edit should do, in words (zh or en): picks the look when `look` is not given "
        '("80年代港风胶片质感" is hk80s); a request to change a person\'s ethnicity, or to make a child older or '
        "sexualised, is refused (422 instruction_refused)",
    )
    look: Literal[LOOK_NAMES] | None = Field(
        None, description=f"the film look ({', '.join(LOOK_NAMES)}; GET /v1/edit/looks); default: from the prompt"
    )
    scope: Literal["whole", "face"] = Field(
        "whole", description="whole: the photo; face: only a feathered mask over each face, the rest untouched"
    )
    strength: float = Field(1.0, ge=0.0, le=1.0, description="0 keeps the photo, 1 the full look")
    identity_keep: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="how much of the person's own face is blended back over the look, through a feathered mask over "
        "each face (1: the face region as restored)",
    )
    model: Literal[NEURAL_EDITORS] | None = Field(
        None,
        description="the editor: the LOOK engine by default (film looks, no model); instructpix2pix: InstructPix2Pix "
        "on SDXL, flux2-klein: FLUX.2 [klein] 4B, both in the Renderer (the generative weights; 503 naming the pull "
        "command without them); external: the operator's OpenAI-compatible images endpoint (e.g. Qwen-Image-Edit; "
        "503 where none is configured). Each edits by `prompt` alone",
    )
    steps: int = Field(
        20,
        ge=1,
        le=60,
        description="instructpix2pix, flux2-klein: sampling steps (FLUX.2 [klein] 4B is distilled to 4: steps=4 runs "
        "it at its own speed)",
    )
    restore: bool = Field(True, description="restore the faces first (the restore job's restorer)")
    seed: int = Field(0, ge=0, le=2**32 - 1, description="the grain's seed: the same seed gives the same result")
    min_identity: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="refuse (422 identity_changed) a result whose face's similarity to the face before the look is "
        "below this, on the identity judge's scale (each face's identity is reported either way)",
    )
    format: Literal["auto", "jpeg", "png", "webp"] = Field("auto", description="auto: JPEG for JPEG input, else PNG")

    @model_validator(mode="after")
    def _neural_editors_edit_by_words(self) -> EditParams:
        if self.model in NEURAL_EDITORS and self.prompt is None:
            raise ValueError(f"model {self.model} edits by the words of `prompt`: give one")
        if self.model in NEURAL_EDITORS and self.look is not None:
            raise ValueError(f"`look` is the LOOK engine's; model {self.model} reads only `prompt`")
        return self
