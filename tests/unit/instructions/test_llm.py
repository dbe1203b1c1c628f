"""The language-model interpreter against a fake OpenAI-compatible server on 127.0.0.1: what it sends (the JSON schema
built from the job params models), what it accepts, and how it falls back to the rules on every kind of failure."""

from __future__ import annotations

import asyncio
import socket

import pytest
from fastapi.testclient import TestClient

from serve_app.instructions import InstructionsConfig, InstructionUnclear, JobHint, LlmOptions, build_interpreter
from serve_app.registry import JOB_NAMES


def _interpret(interpreter, prompt, hint=None):
    return asyncio.run(interpreter.interpret(prompt, hint))


def _llm(job_ctx, fake_llm, **options):
    llm = LlmOptions(base_url=fake_llm.base_url, model="tiny-instruct", **{"timeout_s": 5.0, **options})
    return build_interpreter(InstructionsConfig(interpreter="llm", llm=llm), job_ctx)


def test_the_model_answer_becomes_the_instruction(job_ctx, fake_llm):
    fake_llm.answer({"task": "idphoto", "params": {"spec": "cn-1inch", "background": "blue"}})
    instruction = _interpret(_llm(job_ctx, fake_llm), "一寸照，背景要蓝的")
    assert (instruction.task, instruction.fields(), instruction.interpreter) == (
        "idphoto",
        {"spec": "cn-1inch", "background": "#628bce"},
        "llm",
    )
    assert instruction.notes == ("read by tiny-instruct",)


def test_the_request_carries_the_prompt_and_a_schema_from_the_params_models(job_ctx, fake_llm):
    fake_llm.answer({"task": "restore", "params": {"upscale": 2}})
    _interpret(_llm(job_ctx, fake_llm, api_key="sk-local"), "修复并放大两倍")
    [sent] = fake_llm.requests
    body = sent["body"]
    assert (sent["path"], sent["auth"], body["model"], body["temperature"]) == (
        "/v1/chat/completions",
        "Bearer sk-local",
        "tiny-instruct",
        0,
    )
    assert body["messages"][-1] == {"role": "user", "content": "修复并放大两倍"}
    assert "cn-1inch = 一寸 / 1 inch" in body["messages"][0]["content"]
    schema = body["response_format"]["json_schema"]["schema"]
    branches = {branch["properties"]["task"]["const"]: branch for branch in schema["anyOf"]}
    assert set(branches) == {*JOB_NAMES, "unclear"}  # the ID photo's steps too (idphoto-matte...)
    assert set(branches["idphoto-matte"]["properties"]["params"]["properties"]) == {"matting", "dpi"}
    assert "Choose a step (idphoto-matte, idphoto-crop" in body["messages"][0]["content"]
    idphoto = branches["idphoto"]["properties"]["params"]["properties"]
    assert "cn-1inch" in idphoto["spec"]["enum"] and "us-passport" in idphoto["spec"]["enum"]
    assert "return" not in idphoto
    assert branches["cartoon"]["properties"]["params"]["properties"]["style"]["enum"] == list(job_ctx.cartoon_styles)
    assert branches["restore"]["properties"]["params"]["properties"]["upscale"]["enum"] == [1, 2, 4]


@pytest.mark.parametrize(
    ("mode", "key"), [("guided_json", "guided_json"), ("structured_outputs", "structured_outputs")]
)
def test_older_and_newer_vllm_structured_output_fields(job_ctx, fake_llm, mode, key):
    fake_llm.answer({"task": "cartoon", "params": {"style": "sketch"}})
    instruction = _interpret(_llm(job_ctx, fake_llm, structured_output=mode), "素描")
    body = fake_llm.requests[0]["body"]
    schema = body[key] if mode == "guided_json" else body[key]["json"]
    assert "anyOf" in schema and "response_format" not in body
    assert instruction.fields() == {"style": "sketch"}


def test_values_a_model_fills_in_unasked_are_left_out(job_ctx, fake_llm):
    # dpi 300 and layout none are the defaults; with a preset, an explicit dpi would be refused.
    answer = {"spec": "us-passport", "dpi": 300, "layout": "none", "background": None, "return": "json"}
    fake_llm.answer({"task": "idphoto", "params": answer})
    instruction = _interpret(_llm(job_ctx, fake_llm), "US passport photo")
    assert (instruction.interpreter, instruction.fields()) == ("llm", {"spec": "us-passport"})


def test_a_chosen_job_narrows_the_schema(job_ctx, fake_llm):
    fake_llm.answer({"task": "cartoon", "params": {"style": "3d"}})
    instruction = _interpret(_llm(job_ctx, fake_llm), "3D", JobHint("cartoon"))
    branches = fake_llm.requests[0]["body"]["response_format"]["json_schema"]["schema"]["anyOf"]
    assert [branch["properties"]["task"]["const"] for branch in branches] == ["cartoon", "unclear"]
    assert instruction.fields() == {"style": "3d"}


FAILURES = [
    ({"content": "Sure! Here is your ID photo config: spec=cn-1inch"}, "is not JSON"),
    ({"content": {"task": "restore", "params": {"upscale": 3}}}, "params are invalid: upscale"),
    ({"content": {"task": "teleport", "params": {}}}, "unknown job 'teleport'"),
    ({"content": {"params": {}}}, "has no task"),
    ({"content": {"task": "unclear", "reason": "no idea"}}, "found no single job: no idea"),
    ({"status": 500}, "HTTP 500"),
    ({"content": {"task": "idphoto", "params": "cn-1inch"}}, "params are not an object"),
    # Broken replies (row 22 of issue 21: these were 500s): cut short, not UTF-8, nested past the JSON parser.
    ({"raw": b'{"choices": [{"message"', "declared_bytes": 4096}, "broke off: IncompleteRead"),
    ({"raw": b'{"choices": "\xff\xfe"}'}, "reply is not JSON"),
    ({"raw": b"[" * 200_000}, "reply is not JSON"),
    ({"content": "[" * 200_000}, "answer is not JSON"),
]


@pytest.mark.parametrize(("reply", "reason"), FAILURES, ids=[reason for _, reason in FAILURES])
def test_any_failure_falls_back_to_the_rules_and_says_why(job_ctx, fake_llm, reply, reason):
    fake_llm.answer(**reply)
    instruction = _interpret(_llm(job_ctx, fake_llm), "蓝底一寸证件照")
    assert (instruction.task, instruction.fields()) == ("idphoto", {"spec": "cn-1inch", "background": "#628bce"})
    assert instruction.interpreter == "rules-fallback"
    assert instruction.notes[0].startswith("language model tiny-instruct failed (")
    assert reason in instruction.notes[0] and instruction.notes[0].endswith("answered by the rules")


def test_a_slow_model_is_abandoned_at_its_timeout(job_ctx, fake_llm):
    fake_llm.answer({"task": "cartoon", "params": {"style": "anime"}}, delay_s=2.0)
    instruction = _interpret(_llm(job_ctx, fake_llm, timeout_s=0.3), "修复老照片")
    assert (instruction.task, instruction.interpreter) == ("restore", "rules-fallback")
    assert "no answer within 0.3 s" in instruction.notes[0]


def test_an_unreachable_endpoint_falls_back(job_ctx):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    llm = LlmOptions(base_url=f"http://127.0.0.1:{port}/v1", model="absent", timeout_s=2.0)
    instruction = _interpret(build_interpreter(InstructionsConfig(interpreter="llm", llm=llm), job_ctx), "素描")
    assert (instruction.fields(), instruction.interpreter) == ({"style": "sketch"}, "rules-fallback")
    assert "unreachable" in instruction.notes[0]


def test_when_model_and_rules_both_find_no_job_the_answer_is_unclear(job_ctx, fake_llm):
    fake_llm.answer({"task": "unclear", "reason": "the user only says hello"})
    with pytest.raises(InstructionUnclear, match="names no job") as refused:
        _interpret(_llm(job_ctx, fake_llm), "hello")
    assert refused.value.details["llm_error"] == "the model found no single job: the user only says hello"


def test_a_model_that_picks_another_job_than_the_caller_is_not_followed(job_ctx, fake_llm):
    fake_llm.answer({"task": "restore", "params": {}})
    instruction = _interpret(_llm(job_ctx, fake_llm), "素描", JobHint("cartoon"))
    assert (instruction.task, instruction.interpreter) == ("cartoon", "rules-fallback")
    assert "chose job restore, the caller cartoon" in instruction.notes[0]


def test_the_route_uses_the_interpreter_the_serve_config_names(api, fake_llm):
    """The answer names the interpreter under its wire name ``engine``, which clients (the web page) read."""
    fake_llm.answer({"task": "cartoon", "params": {"style": "handdrawn"}})
    api.state.instructions = InstructionsConfig.model_validate(
        {"interpreter": "llm", "llm": {"base_url": fake_llm.base_url, "model": "tiny-instruct", "timeout_s": 5}}
    )
    with TestClient(api) as client:
        answer = client.post("/v1/instructions", json={"prompt": "画成手绘的样子"})
    assert answer.status_code == 200
    assert answer.json() == {
        "task": "cartoon",
        "params": {"style": "handdrawn"},
        "engine": "llm",
        "notes": ["read by tiny-instruct"],
    }


def test_the_llm_interpreter_needs_an_endpoint_or_the_llm_deployment():
    """``interpreter: llm`` alone is valid here: the app's args say where the model is (``AppArgs`` checks)."""
    from serve_app.app import AppArgs

    with pytest.raises(ValueError, match="needs an llm section"):
        AppArgs.model_validate({"instructions": {"interpreter": "llm"}})
    assert AppArgs.model_validate({"instructions": {"interpreter": "llm"}, "llm": {}}).llm_route.deployment is not None
    with pytest.raises(ValueError, match="one language model per app"):
        AppArgs.model_validate(
            {"instructions": {"llm": {"base_url": "http://127.0.0.1:1/v1", "model": "m"}}, "llm": {}}
        )
    with pytest.raises(ValueError, match="http"):
        LlmOptions(base_url="127.0.0.1:8001", model="m")


def test_a_config_that_still_names_the_interpreter_engine_loads_the_same():
    """``engine`` was the key's old name: users' YAMLs that still say ``engine: llm`` keep working; both at once is
    refused, so a stale key never silently wins."""
    llm = {"base_url": "http://127.0.0.1:8001/v1", "model": "tiny-instruct"}
    old = InstructionsConfig.model_validate({"engine": "llm", "llm": llm})
    assert old == InstructionsConfig.model_validate({"interpreter": "llm", "llm": llm})
    assert old.interpreter == "llm" and InstructionsConfig.model_validate({"engine": "rules"}).interpreter == "rules"
    assert InstructionsConfig.model_validate({"engine": "llm"}).interpreter == "llm"  # the model: AppArgs
    with pytest.raises(ValueError, match="write interpreter only"):
        InstructionsConfig.model_validate({"engine": "llm", "interpreter": "rules", "llm": llm})
