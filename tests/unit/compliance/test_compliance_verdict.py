"""The compliance gate as the jobs call it (``require_compliant``): the detector first, then the language model's
structured verdict where the app has one (a fake OpenAI-compatible server here, as for the instruction tests), the
rules whenever the model fails or is slow, and a refusal as a 422 ``input_refused`` with its reason codes, reasons
and advice in English and Chinese. Refusals by the detector use a stand-in for its output, never such a photo."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import io

import numpy as np
import pytest
from PIL import Image

from deployments.common.errors import InputRefused
from deployments.compliance import nudenet
from deployments.compliance.verdict import REASON_CODES, PhotoAssessment
from deployments.idphoto.texts import TEXTS
from serve_app.backend import Backend
from serve_app.jobs import run_job
from serve_app.jobs.compliance import require_compliant
from serve_app.jobs.context import CompliancePolicy
from serve_app.llm import LlmClient, LlmOptions
from serve_app.settings import Settings
from tests.unit.compliance.compliance_samples import CENTRE, stand_in_output
from tests.unit.serve_app.test_job_routes import client_for

CLEAR = {
    "real_photograph": True,
    "photo_of_screen_or_print": False,
    "living_person": True,
    "face_count": 1,
    "eyes_visible": True,
    "sunglasses": False,
    "face_covered": False,
    "appears_under_18": False,
    "nudity": False,
}


@pytest.fixture
def with_llm(local_backend, fake_llm) -> Backend:
    """The in-process stages with a language model behind the fake server."""
    llm = LlmClient.over_http(LlmOptions(base_url=fake_llm.base_url, model="tiny-vl", timeout_s=5.0))
    return Backend(local_backend.transport, local_backend.context, llm)


@pytest.fixture(scope="module")
def rgb(photo_jpeg) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(photo_jpeg)).convert("RGB"))


def _check(backend, rgb, job_ctx, purpose="idphoto", **policy):
    context = dataclasses.replace(job_ctx, compliance=CompliancePolicy(**policy)) if policy else job_ctx
    return asyncio.run(require_compliant(backend, rgb, purpose, context, lang="zh"))


def _refusal(backend, rgb, job_ctx, purpose="idphoto", **policy) -> InputRefused:
    with pytest.raises(InputRefused) as refused:
        _check(backend, rgb, job_ctx, purpose, **policy)
    return refused.value


def test_the_model_refuses_an_id_photo_with_its_reason_codes(with_llm, fake_llm, rgb, job_ctx):
    fake_llm.answer({**CLEAR, "eyes_visible": False, "sunglasses": True})
    refused = _refusal(with_llm, rgb, job_ctx)
    assert (refused.code, refused.http_status) == ("input_refused", 422)
    assert refused.reason_codes == ("eyes_not_visible", "sunglasses") == tuple(refused.details["reason_codes"])
    assert refused.details["checked_by"] == "llm" and refused.details["model"] == "tiny-vl"
    assert refused.details["reasons"]["en"] == [
        "the eyes are not both open and visible",
        "the person wears sunglasses or tinted glasses",
    ]
    assert refused.details["reasons"]["zh"] == ["双眼没有都睁开且清晰可见", "佩戴了墨镜或有色眼镜"]
    assert refused.details["advice"]["zh"][1] == "请摘下墨镜或有色眼镜。"
    assert refused.message.startswith("照片未通过检查：")  # the caller's language


def test_the_request_carries_the_photo_and_the_verdicts_schema(with_llm, fake_llm, rgb, job_ctx):
    fake_llm.answer(CLEAR)
    outcome = _check(with_llm, rgb, job_ctx)
    assert (outcome.checked_by, outcome.notes) == ("llm", ("checked by tiny-vl",))
    [sent] = fake_llm.requests
    body = sent["body"]
    assert (body["model"], body["temperature"]) == ("tiny-vl", 0)
    assert "an ID photo" in body["messages"][0]["content"]
    text, image = body["messages"][1]["content"]
    assert text["type"] == "text" and image["image_url"]["url"].startswith("data:image/jpeg;base64,")
    photo = Image.open(io.BytesIO(base64.b64decode(image["image_url"]["url"].split(",", 1)[1])))
    assert photo.size == (256, 256)  # the photo as it is (a large one: long side 1024)
    schema = body["response_format"]["json_schema"]
    assert schema["name"] == "photo_check"
    assert set(schema["schema"]["required"]) == set(PhotoAssessment.model_fields)
    assert schema["schema"]["additionalProperties"] is False


def test_what_refuses_depends_on_the_purpose(with_llm, fake_llm, rgb, job_ctx):
    """Two faces and a child: an ID photo's own report judges its face count, and children get passports; a
    generative edit needs one adult face."""
    fake_llm.answer({**CLEAR, "face_count": 2, "appears_under_18": True})
    assert _check(with_llm, rgb, job_ctx).checked_by == "llm"
    refused = _refusal(with_llm, rgb, job_ctx, "generative")
    assert refused.reason_codes == ("face_count", "minor")
    assert refused.details["reasons"]["en"][0] == "2 faces found; this needs exactly one"
    assert "生成式编辑" in refused.details["reasons"]["zh"][1]


def test_every_reason_code_reads_in_both_languages():
    for code in REASON_CODES:
        assert {"en", "zh"} <= set(TEXTS[f"refused_{code}"])
        assert code == "face_count" or {"en", "zh"} <= set(TEXTS[f"advice_{code}"])


BROKEN = [
    ({"status": 500}, "HTTP 500"),
    ({"content": "Looks fine to me!"}, "answer is not JSON"),
    ({"content": {**CLEAR, "sunglasses": "maybe"}}, "does not follow the schema: sunglasses"),
    ({"content": {key: value for key, value in CLEAR.items() if key != "nudity"}}, "schema: nudity: Field required"),
    ({"content": {**CLEAR, "verdict": "ok"}}, "schema: verdict: Extra inputs"),
    ({"content": ["not", "an", "object"]}, "does not follow the schema"),
    ({"raw": b'{"choices": [', "declared_bytes": 4096}, "broke off"),
    ({"content": CLEAR, "delay_s": 2.0}, "no answer within 0.3 s"),
]


@pytest.mark.parametrize(("reply", "reason"), BROKEN, ids=[reason for _, reason in BROKEN])
def test_a_broken_or_slow_model_leaves_the_rules_to_answer(with_llm, fake_llm, rgb, job_ctx, reply, reason):
    fake_llm.answer(**reply)
    outcome = _check(with_llm, rgb, job_ctx, llm_timeout_s=0.3)
    assert outcome.checked_by == "rules-fallback"
    assert outcome.notes[0].startswith("language model tiny-vl failed (") and reason in outcome.notes[0]


def _detector_finds(monkeypatch, label="FEMALE_BREAST_EXPOSED", score=0.8):
    """The session answers a finding at the centre of every view (the photo and its mirror)."""

    def run(self, batch):
        return np.stack([stand_in_output([(label, score, CENTRE)]) for _ in range(len(batch))])

    monkeypatch.setattr(nudenet.NudeNetDetector, "run", run)


def test_the_detector_refuses_before_the_model_is_asked(with_llm, fake_llm, rgb, job_ctx, monkeypatch):
    _detector_finds(monkeypatch)
    fake_llm.answer(CLEAR)
    refused = _refusal(with_llm, rgb, job_ctx)
    assert refused.reason_codes == ("explicit_content",) and refused.details["checked_by"] == "nudenet"
    assert refused.details["found"][0]["label"] == "FEMALE_BREAST_EXPOSED"
    assert refused.details["reasons"] == {"en": ["the photo shows nudity"], "zh": ["照片含有裸露内容"]}
    assert fake_llm.requests == []


def test_without_a_language_model_the_rules_answer(local_backend, rgb, job_ctx, monkeypatch):
    assert _check(local_backend, rgb, job_ctx).checked_by == "rules"
    _detector_finds(monkeypatch, "BUTTOCKS_EXPOSED")
    assert _refusal(local_backend, rgb, job_ctx).reason_codes == ("explicit_content",)


def test_the_operator_turns_the_model_or_the_id_photo_gate_off(with_llm, fake_llm, rgb, job_ctx, monkeypatch):
    fake_llm.answer({**CLEAR, "sunglasses": True})
    assert _check(with_llm, rgb, job_ctx, llm=False).checked_by == "rules" and fake_llm.requests == []
    _detector_finds(monkeypatch)
    assert _check(with_llm, rgb, job_ctx, idphoto=False).checked_by == "off"  # PORTRAIT_COMPLIANCE_IDPHOTO=false
    assert _refusal(with_llm, rgb, job_ctx, "generative", idphoto=False).reason_codes == ("explicit_content",)


def test_the_id_photo_job_and_its_whole_photo_steps_are_gated(local_backend, photo_jpeg, job_ctx, monkeypatch):
    from serve_app.jobs import parse_job_params

    result = asyncio.run(
        run_job(local_backend, "idphoto", photo_jpeg, parse_job_params("idphoto", {}, job_ctx), job_ctx)
    )
    assert "compliance" in result.meta.timings_ms
    _detector_finds(monkeypatch)
    for task in ("idphoto", "idphoto-matte"):
        params = parse_job_params(task, {}, job_ctx)
        with pytest.raises(InputRefused):
            asyncio.run(run_job(local_backend, task, photo_jpeg, params, job_ctx))


def test_a_refusal_over_http_is_a_422_with_its_codes(local_backend, photo_jpeg, monkeypatch):
    _detector_finds(monkeypatch)
    client = client_for(local_backend)
    answer = client.post("/v1/idphoto", files={"image": ("me.jpg", photo_jpeg, "image/jpeg")}, data={"lang": "zh"})
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert (error["code"], error["details"]["reason_codes"]) == ("input_refused", ["explicit_content"])
    assert error["details"]["advice"]["en"] == ["Use a photo of the person fully clothed."]
    hivision = client.post("/idphoto", files={"input_image": ("me.jpg", photo_jpeg, "image/jpeg")})  # its /idphoto
    assert hivision.status_code != 200 or hivision.json()["status"] is False
    assert "input_refused" in hivision.text
    # PORTRAIT_COMPLIANCE_IDPHOTO=false: ID photos are not gated.
    open_client = client_for(local_backend, Settings(compliance_idphoto=False))
    assert open_client.post("/v1/idphoto", files={"image": ("me.jpg", photo_jpeg, "image/jpeg")}).status_code == 200
