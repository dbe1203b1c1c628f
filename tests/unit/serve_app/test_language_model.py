"""One language-model client, two transports: the OpenAI-compatible endpoint over HTTP and the LLM deployment by its
Serve handle. The callers (the instruction interpreter here) get the same answers and the same fallbacks from both;
the handle is a stand-in with ``LLMServer.chat``'s shape (a stream whose one item is the completion)."""

from __future__ import annotations

import asyncio
import json

import pytest

from serve_app.handles import ServeChatTransport, app_language_model
from serve_app.instructions import InstructionsConfig, build_interpreter
from serve_app.llm import HttpTransport, LlmClient, LlmDeploymentArgs, LlmFailure, LlmOptions, LlmRoute


class Completion:
    """What ray.serve.llm's chat stream yields: a pydantic ChatCompletionResponse (``model_dump``)."""

    def __init__(self, payload):
        self.payload = payload

    def model_dump(self):
        return self.payload


class Request:
    """Stands in for ray.serve.llm's ChatCompletionRequest: keeps the body."""

    def __init__(self, **body):
        self.body = body


class FakeHandle:
    """``handle.options(stream=True).chat.remote(request)`` answering ``reply(request)`` after ``delay_s``."""

    def __init__(self, reply, delay_s=0.0):
        self.reply, self.delay_s, self.requests, self.stream = reply, delay_s, [], None

    def options(self, **options):
        self.stream = options.get("stream")
        return self

    @property
    def chat(self):
        return self

    def remote(self, request):
        self.requests.append(request)

        async def answers():
            await asyncio.sleep(self.delay_s)
            yield self.reply(request)

        return answers()


def _answer(content):
    return lambda request: Completion({"choices": [{"message": {"role": "assistant", "content": json.dumps(content)}}]})


def _deployment_interpreter(job_ctx, handle, **args):
    client = LlmClient.over(ServeChatTransport(handle, Request), LlmDeploymentArgs(**args))
    return build_interpreter(InstructionsConfig(interpreter="llm"), job_ctx, client)


def test_the_interpreter_reads_a_prompt_through_the_deployment_as_through_an_endpoint(job_ctx):
    handle = FakeHandle(_answer({"task": "cartoon", "params": {"style": "sketch"}}))
    instruction = asyncio.run(_deployment_interpreter(job_ctx, handle).interpret("画成素描"))
    assert (instruction.task, instruction.fields(), instruction.interpreter) == ("cartoon", {"style": "sketch"}, "llm")
    assert instruction.notes == ("read by Qwen/Qwen3-VL-8B-Instruct",)
    [request] = handle.requests
    assert handle.stream is True and request.body["model"] == "Qwen/Qwen3-VL-8B-Instruct"
    assert request.body["response_format"]["json_schema"]["name"] == "portrait_job"
    assert request.body["messages"][-1] == {"role": "user", "content": "画成素描"}


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (
            lambda request: Completion({"error": {"message": "engine dead", "type": "InternalServerError"}}),
            "engine dead",
        ),
        (lambda request: (_ for _ in ()).throw(RuntimeError("replica lost")), "failed: RuntimeError: replica lost"),
        (lambda request: ["data: {}"], "not a chat completion"),
    ],
    ids=["error response", "lost replica", "a stream"],
)
def test_a_failing_deployment_falls_back_to_the_rules(job_ctx, reply, reason):
    instruction = asyncio.run(_deployment_interpreter(job_ctx, FakeHandle(reply)).interpret("蓝底一寸证件照"))
    assert (instruction.task, instruction.interpreter) == ("idphoto", "rules-fallback")
    assert reason in instruction.notes[0]


def test_a_slow_deployment_is_abandoned_at_its_timeout(job_ctx):
    handle = FakeHandle(_answer({"task": "cartoon", "params": {}}), delay_s=2.0)
    instruction = asyncio.run(_deployment_interpreter(job_ctx, handle, timeout_s=0.2).interpret("修复老照片"))
    assert (instruction.task, instruction.interpreter) == ("restore", "rules-fallback")
    assert "no answer within 0.2 s" in instruction.notes[0]


def test_the_app_has_one_language_model_and_the_callers_do_not_choose_the_transport():
    endpoint = LlmOptions(base_url="http://127.0.0.1:9/v1", model="m", timeout_s=3)
    over_http = app_language_model(LlmRoute(endpoint=endpoint), None)
    assert isinstance(over_http.transport, HttpTransport) and (over_http.model, over_http.timeout_s) == ("m", 3)
    by_handle = app_language_model(LlmRoute(deployment=LlmDeploymentArgs()), FakeHandle(_answer({})))
    assert isinstance(by_handle.transport, ServeChatTransport) and by_handle.timeout_s == 30
    assert app_language_model(LlmRoute(), None) is None and app_language_model(None, None) is None
    with pytest.raises(ValueError, match="one language model per app"):
        LlmRoute(endpoint=endpoint, deployment=LlmDeploymentArgs())


def test_a_request_the_deployment_cannot_take_is_a_failure_not_a_crash():
    def refuse(**body):
        raise TypeError("unexpected field")

    client = LlmClient(ServeChatTransport(FakeHandle(_answer({})), refuse), "m")
    with pytest.raises(LlmFailure, match="takes no such request"):
        asyncio.run(client.ask_json([{"role": "user", "content": "x"}], {"type": "object"}, schema_name="x"))
