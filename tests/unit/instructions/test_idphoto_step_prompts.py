"""The ID photo step by step in words: a prompt about an ID photo stays the whole ``idphoto`` job (its options belong
to the steps too), and a step is chosen only when a phrase names it; a step asked with options it does not take, or
two steps at once, is refused rather than guessed."""

from __future__ import annotations

import base64
import io

import pytest
from fastapi.testclient import TestClient
from PIL import Image

from serve_app.instructions import InstructionUnclear, JobHint
from serve_app.jobs import parse_job_params

BLUE = "#628bce"

WHOLE_JOB = [
    ("蓝底一寸证件照", {"spec": "cn-1inch", "background": BLUE}),
    ("蓝底一寸", {"spec": "cn-1inch", "background": BLUE}),  # options the background and crop steps also take
    ("证件照 不超过50KB", {"max_kb": 50}),  # an option of three steps as well
    ("证件照抠图", {"background": "transparent", "format": "png"}),  # 抠图 alone: an ID photo without background
    ("US passport photo, white background", {"spec": "us-passport", "background": "#ffffff"}),
    ("6寸相纸排版的一寸照", {"spec": "cn-1inch", "layout": "6inch"}),
]

STEPS = [
    ("只抠图", "idphoto-matte", {}),
    ("证件照只抠图", "idphoto-matte", {}),  # the whole job named too: the step is the narrower request
    ("cut out the person, selfie matting", "idphoto-matte", {}),
    ("crop only, 一寸", "idphoto-crop", {"spec": "cn-1inch"}),
    ("只换底色 蓝底", "idphoto-background", {"background": BLUE}),
    ("加水印", "idphoto-watermark", {}),
    ("只排版 6寸相纸", "idphoto-layout", {"layout": "6inch"}),
    ("只压缩 不超过50KB", "idphoto-filesize", {"max_kb": 50}),
]


@pytest.mark.parametrize(("prompt", "params"), WHOLE_JOB, ids=[prompt for prompt, _ in WHOLE_JOB])
def test_an_id_photo_prompt_stays_the_whole_job(rules, prompt, params):
    instruction = rules.interpret_now(prompt)
    assert (instruction.task, instruction.fields()) == ("idphoto", params)


@pytest.mark.parametrize(("prompt", "task", "params"), STEPS, ids=[prompt for prompt, _, _ in STEPS])
def test_a_step_is_chosen_when_a_phrase_names_it(rules, job_ctx, prompt, task, params):
    instruction = rules.interpret_now(prompt)
    assert (instruction.task, instruction.fields()) == (task, params)
    assert parse_job_params(task, instruction.fields(), job_ctx) == instruction.params


def test_a_step_with_options_it_does_not_take_is_refused_naming_them(rules):
    with pytest.raises(InstructionUnclear, match="idphoto-watermark was chosen") as refused:
        rules.interpret_now("蓝底一寸证件照加水印")
    assert refused.value.details == {"task": "idphoto-watermark", "not_for_this_job": ["蓝底", "一寸"]}


def test_two_steps_at_once_are_refused(rules):
    with pytest.raises(InstructionUnclear, match="several jobs") as refused:
        rules.interpret_now("只抠图然后加水印")
    assert refused.value.details["tasks"] == {"idphoto-matte": ["只抠图"], "idphoto-watermark": ["加水印"]}


def test_a_step_chosen_by_the_caller_takes_its_options_from_the_prompt(rules):
    chosen = rules.interpret_now("蓝底", JobHint("idphoto-background"))
    assert (chosen.task, chosen.fields()) == ("idphoto-background", {"background": BLUE})
    with pytest.raises(InstructionUnclear, match="does not do: 6寸相纸"):
        rules.interpret_now("6寸相纸", JobHint("idphoto-background"))


def test_the_instructions_route_answers_a_step_and_its_params(api):
    with TestClient(api) as client:
        answer = client.post("/v1/instructions", json={"prompt": "只换底色，红底"})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {
        "task": "idphoto-background",
        "params": {"background": "#d74532"},
        "engine": "rules",
        "notes": ['job idphoto-background: named by "只换底色"', 'background = red from "红底"'],
    }


def test_a_step_is_an_openai_model_id(api, photo_jpeg):
    with TestClient(api) as client:
        answer = client.post(
            "/v1/images/edits",
            files={"image": ("me.jpg", photo_jpeg, "image/jpeg")},
            data={"prompt": "please", "model": "idphoto-matte"},
        )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["portrait"]["task"], body["portrait"]["params"]) == ("idphoto-matte", {})
    cut = Image.open(io.BytesIO(base64.b64decode(body["data"][0]["b64_json"])))
    assert (cut.mode, cut.size) == ("RGBA", (256, 256))
