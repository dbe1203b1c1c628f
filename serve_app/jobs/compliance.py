"""The compliance gate, one call for every job that needs it: ``await require_compliant(backend, rgb, purpose,
context)`` before any GPU stage runs on a photo (the ID photo and its whole-photo steps now; the generative jobs when
they come). No Ray here.

1. The detector (``ComplianceGate``: NudeNet on a CPU, batched across requests) refuses nudity.
2. Where the app has a language model (``backend.llm``: the LLM deployment by handle, or an OpenAI-compatible
   endpoint) and ``PORTRAIT_COMPLIANCE_LLM`` is on, it sees the photo and answers the questions of
   ``PhotoAssessment`` as structured JSON, validated by pydantic; the purpose decides which answers refuse.
3. When the model fails (unreachable, an error, past ``PORTRAIT_COMPLIANCE_LLM_TIMEOUT_S``, an answer off the
   schema) the rules answer: the detector's verdict alone, and the outcome says so (``rules-fallback``).

A refusal is a 422 ``input_refused`` with ``reason_codes`` in the ID-photo report's vocabulary, the reasons and
advice in English and Chinese (``deployments/compliance/verdict.py``).
"""

from __future__ import annotations

import base64
import functools
import logging
from dataclasses import dataclass

import cv2
import numpy as np
from pydantic import ValidationError

from deployments.common.image import encode_image
from deployments.compliance.types import CHECK_PHOTO, PhotoToCheck
from deployments.compliance.verdict import PhotoAssessment, Purpose, answer_schema, input_refused, system_prompt
from deployments.idphoto.texts import Lang
from serve_app.backend import Backend
from serve_app.jobs.context import JobContext
from serve_app.jobs.deadline import run_in_worker
from serve_app.llm import LlmClient, LlmFailure

logger = logging.getLogger(__name__)

LLM_IMAGE_SIDE_PX = 1024  # the photo the model sees: long side at most this (Qwen3-VL reads any size; fewer tokens)
SCHEMA_NAME = "photo_check"


@dataclass(frozen=True)
class ComplianceOutcome:
    """A photo the gate let through: what checked it (``off``, ``rules``, ``llm``, ``rules-fallback``) and why."""

    checked_by: str
    notes: tuple[str, ...] = ()


async def require_compliant(
    backend: Backend, rgb: np.ndarray, purpose: Purpose, context: JobContext, *, lang: Lang = "en"
) -> ComplianceOutcome:
    """Let ``rgb`` (HxWx3 uint8 RGB, the whole photo) through, or raise ``InputRefused`` (messages in ``lang``)."""
    policy = context.compliance
    if purpose == "idphoto" and not policy.idphoto:
        return ComplianceOutcome("off")
    verdict = await backend.call(CHECK_PHOTO, PhotoToCheck(rgb))
    if not verdict.passed:
        found = [detection.to_json() for detection in verdict.refusing]
        raise input_refused(verdict.reason_codes, checked_by=verdict.engine.engine, lang=lang, details={"found": found})
    llm = backend.llm if policy.llm else None
    if llm is None:
        return ComplianceOutcome("rules")
    try:
        assessment = await assess(llm, rgb, purpose, policy.llm_timeout_s)
    except LlmFailure as exc:
        logger.warning("language model %s failed (%s): the compliance rules answer", llm.model, exc)
        return ComplianceOutcome("rules-fallback", (f"language model {llm.model} failed ({exc}): the rules checked",))
    codes = assessment.reason_codes(purpose)
    if codes:
        raise input_refused(
            codes,
            checked_by="llm",
            lang=lang,
            face_count=assessment.face_count,
            details={"model": llm.model, "assessment": assessment.model_dump()},
        )
    return ComplianceOutcome("llm", (f"checked by {llm.model}",))


async def assess(llm: LlmClient, rgb: np.ndarray, purpose: Purpose, timeout_s: float) -> PhotoAssessment:
    """The model's verdict on the photo (``LlmFailure`` when it gives none that follows the schema)."""
    image_url = await run_in_worker(functools.partial(data_url, rgb))
    messages = [
        {"role": "system", "content": system_prompt(purpose)},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Check this photo."},
                {"type": "image_url", "image_url": {"url": image_url}},
            ],
        },
    ]
    answer = await llm.ask_json(messages, answer_schema(), schema_name=SCHEMA_NAME, timeout_s=timeout_s)
    try:
        return PhotoAssessment.model_validate(answer)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'answer'}: {e['msg']}" for e in exc.errors()[:3])
        raise LlmFailure(f"the model's verdict does not follow the schema: {problems}") from None


def data_url(rgb: np.ndarray, max_side_px: int = LLM_IMAGE_SIDE_PX) -> str:
    """The photo as a JPEG ``data:`` URL, its long side at most ``max_side_px``."""
    height, width = rgb.shape[:2]
    scale = max_side_px / max(height, width)
    if scale < 1:
        size = (max(1, round(width * scale)), max(1, round(height * scale)))
        rgb = cv2.resize(rgb, size, interpolation=cv2.INTER_AREA)
    jpeg = encode_image(rgb, "jpeg", quality=90)
    return "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii")
