"""What the compliance gate refuses, for which purpose, and how a refusal reads.

Two purposes: ``idphoto`` (the ID-photo job and its steps that take a whole photo) and ``generative`` (the portrait
and edit jobs to come). The detector (``predictor.py``) refuses nudity for both; the language model, where the app
has one, answers :class:`PhotoAssessment` (its JSON schema is sent as structured output, its answer validated here),
and each purpose refuses the codes of ``REFUSED_FOR``. Codes, reasons and advice are the ID-photo report's vocabulary
(``deployments/idphoto/texts.py``: ``refused_<code>``, ``advice_<code>``), in English and Chinese.

Torch-free: the ingress builds refusals.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from deployments.common.errors import InputRefused
from deployments.compliance.types import EXPLICIT_CONTENT
from deployments.idphoto.texts import LANGS, Lang, say

Purpose = Literal["idphoto", "generative"]
PURPOSES: tuple[Purpose, ...] = ("idphoto", "generative")

REASON_CODES: tuple[str, ...] = (
    EXPLICIT_CONTENT,
    "not_a_photo",
    "photo_of_screen",
    "not_a_person",
    "face_count",
    "eyes_not_visible",
    "sunglasses",
    "face_covered",
    "minor",
)
# An ID photo's face count is its report's own check, against its standard (a preset may want two); children's
# passports are ID photos too. A generative edit needs one adult face.
REFUSED_FOR: Mapping[Purpose, frozenset[str]] = {
    "idphoto": frozenset(REASON_CODES) - {"face_count", "minor"},
    "generative": frozenset(REASON_CODES),
}


class PhotoAssessment(BaseModel):
    """The language model's verdict on one photo: one answer per question, nothing else."""

    model_config = ConfigDict(extra="forbid")

    real_photograph: bool = Field(
        description="a photograph taken with a camera of a real scene; false for a drawing, painting, cartoon, "
        "3D render or AI-generated image"
    )
    photo_of_screen_or_print: bool = Field(
        description="the image shows a screen (phone, monitor, TV) or a printed photo, ID card or poster with the "
        "person on it, rather than the person"
    )
    living_person: bool = Field(
        description="the main subject is a real, living person; false for a statue, mannequin, doll, mask or animal"
    )
    face_count: int = Field(ge=0, le=100, description="how many human faces are visible")
    eyes_visible: bool = Field(description="the main person's eyes are both open and visible")
    sunglasses: bool = Field(description="the main person wears sunglasses or tinted glasses")
    face_covered: bool = Field(
        description="part of the main person's face is covered (a mask, scarf, veil over the face, a hand, hair "
        "over the eyes); a headscarf that leaves the face from hairline to chin visible is not a covering"
    )
    appears_under_18: bool = Field(description="the main person appears to be younger than 18")
    nudity: bool = Field(description="the image shows nudity or sexual content")

    def reason_codes(self, purpose: Purpose) -> tuple[str, ...]:
        """The codes this verdict refuses ``purpose`` for, in ``REASON_CODES`` order."""
        found = {
            EXPLICIT_CONTENT: self.nudity,
            "not_a_photo": not self.real_photograph,
            "photo_of_screen": self.photo_of_screen_or_print,
            "not_a_person": not self.living_person,
            "face_count": self.face_count != 1,
            "eyes_not_visible": not self.eyes_visible,
            "sunglasses": self.sunglasses,
            "face_covered": self.face_covered,
            "minor": self.appears_under_18,
        }
        return tuple(code for code in REASON_CODES if found[code] and code in REFUSED_FOR[purpose])


def answer_schema() -> dict[str, Any]:
    """The JSON schema of :class:`PhotoAssessment` (every field required, nothing else allowed)."""
    return PhotoAssessment.model_json_schema()


def system_prompt(purpose: Purpose) -> str:
    use = {
        "idphoto": "an ID photo (passport, visa, ID card) will be made from it",
        "generative": "a generative model will edit the person's portrait (new clothes, background, style)",
    }[purpose]
    return (
        f"You check one photo before a portrait service uses it: {use}. Judge only what you see. Answer with one "
        "JSON object following the schema, every field filled, true or false for each question and the number of "
        "visible human faces."
    )


def refusal_texts(codes: Iterable[str], *, face_count: int | None = None) -> dict[str, dict[Lang, list[str]]]:
    """``reasons`` and ``advice`` for ``codes``, in every language we have."""
    codes = list(codes)
    reasons = {lang: [_reason(lang, code, face_count) for code in codes] for lang in LANGS}
    advice = {lang: [_advice(lang, code) for code in codes] for lang in LANGS}
    return {"reasons": reasons, "advice": advice}


def input_refused(
    codes: Iterable[str],
    *,
    checked_by: str,
    lang: Lang = "en",
    face_count: int | None = None,
    details: Mapping[str, Any] | None = None,
) -> InputRefused:
    """The 422 ``input_refused``: the message in ``lang``, reasons and advice in English and Chinese in
    ``details``, with what checked the photo (``nudenet``, ``llm``...)."""
    codes = tuple(codes)
    texts = refusal_texts(codes, face_count=face_count)
    lead = {"en": "the photo was refused: ", "zh": "照片未通过检查："}[lang]
    separator = {"en": "; ", "zh": "；"}[lang]
    return InputRefused(
        lead + separator.join(texts["reasons"][lang]),
        reason_codes=codes,
        details={**texts, "lang": lang, "checked_by": checked_by, **(details or {})},
    )


def _reason(lang: Lang, code: str, face_count: int | None) -> str:
    if code == "face_count":
        return say(lang, "refused_face_count", count="?" if face_count is None else face_count)
    return say(lang, f"refused_{code}")


def _advice(lang: Lang, code: str) -> str:
    if code == "face_count":
        return say(lang, "advice_faces", needed=1)
    return say(lang, f"advice_{code}")
