"""Plain-language routes: ``POST /v1/instructions`` (ours), and the OpenAI-compatible surface, so existing clients (the
official ``openai`` SDK with ``base_url=http://HOST:8000/v1``) work unchanged:

- ``POST /v1/images/edits``: multipart ``image`` + ``prompt`` → the job the prompt asks for, in the Images API shape;
- ``POST /v1/chat/completions``: a user message with text and an ``image_url`` → an assistant message holding the
  result as a Markdown image (data URL) and what was done; ``stream: true`` answers as server-sent events;
- ``GET /v1/models`` (the route lives in ``routes/catalog.py``): :func:`openai_model_list` makes it an OpenAI
  model list too.

A client's ``model`` is ``portrait`` (the prompt decides), a job (``restore``, ``idphoto``, ``cartoon``) or a specific
model of a job (``gpen-bfr-256``, ``dctnet-sketch-head``). Errors on the OpenAI routes have OpenAI's shape
(:mod:`serve_app.openai_wire`); a chat request's text and photo are read by :mod:`serve_app.chat_messages`. No Ray.
(No ``from __future__ import annotations``: FastAPI resolves the route annotations at run time.)
"""

import base64
import dataclasses
import logging
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse

from deployments.cartoon.styles import cartoon_styles
from deployments.common.errors import InvalidParameter
from deployments.common.weights import ModelSpec
from serve_app.app_state import (
    backend_of,
    instruction_interpreter_of,
    instructions_of,
    language_model_of,
    settings_of,
)
from serve_app.byte_caps import media_caps
from serve_app.chat_messages import image_from_url, read_chat_request, text_and_image_url
from serve_app.deadlines import within_request_timeout
from serve_app.instructions import Instruction, InstructionInterpreter, JobHint, build_interpreter
from serve_app.instructions.vocabulary import enum_values
from serve_app.jobs import JobContext, job_context, parse_job_params, render_over_budget, run_job
from serve_app.jobs.results import JobResult
from serve_app.openai_wire import (
    DEFAULT_MODEL,
    IN_MESSAGES,
    ChatRequest,
    ImageRequired,
    InstructionIn,
    InstructionOut,
    ModelNotFound,
    OpenAIRoute,
    chat_chunk,
)
from serve_app.registry import JOB_ENTRIES, JOB_NAMES, job_entry
from serve_app.uploads import read_upload

logger = logging.getLogger(__name__)

OWNER = "portrait-serve"
# A prompt of 2000 characters, each JSON-escaped (at most 12 bytes), and the task; a longer body is refused unread.
INSTRUCTION_BODY_BYTES = 32 * 1024
CREATED = int(time.time())  # when this process started: the "created" of every model it lists


# --- the instruction interpreter, one per app -----------------------------------------------------------------------


def _interpreter(request: Request, context: JobContext) -> InstructionInterpreter:
    """Built once per app from the Serve YAML's ``args.instructions``."""
    llm = language_model_of(request)
    return instruction_interpreter_of(request, lambda config: build_interpreter(config, context, llm))


# --- models ---------------------------------------------------------------------------------------------------------


def model_hints(manifest: Mapping[str, ModelSpec], context: JobContext) -> dict[str, JobHint | None]:
    """Every ``model`` a client may send: ``portrait`` (None: the prompt decides), each job, and each model that fixes
    an option of a job (a value of its params model's ``model`` option; a cartoon style's head and whole-image models).
    ``portrait`` stays the service's own model, as clients have sent it since the first wave: the ``portrait`` job
    (generated portraits) is reached through it by its words (写真, 形象照...), like every job.
    """
    hints: dict[str, JobHint | None] = {DEFAULT_MODEL: None}
    hints.update({entry.name: JobHint(entry.name) for entry in JOB_ENTRIES if entry.name != DEFAULT_MODEL})
    for entry in JOB_ENTRIES:
        hints.update(
            {
                model_id: JobHint(entry.name, {"model": model_id})
                for model_id in enum_values(entry.params_model, "model")
            }
        )
    for style in cartoon_styles(manifest).values():
        if style.name in context.cartoon_styles:
            for name in (style.head_model, style.background_model):
                if name is not None:
                    hints[name] = JobHint("cartoon", {"style": style.name})
    return hints


def openai_model_list(manifest: Mapping[str, ModelSpec], context: JobContext) -> dict[str, Any]:
    """``GET /v1/models`` as OpenAI's model list (``{"object": "list", "data": [...]}``), beside our manifest."""
    data = []
    for model_id, hint in model_hints(manifest, context).items():
        card: dict[str, Any] = {"id": model_id, "object": "model", "created": CREATED, "owned_by": OWNER}
        card["task"] = hint.task if hint else None
        card["params"] = dict(hint.params) if hint else {}
        if model_id in manifest:
            card["description"] = manifest[model_id].description
        data.append(card)
    return {"object": "list", "data": data}


def _hint(request: Request, model: str, context: JobContext) -> JobHint | None:
    hints = model_hints(context.manifest, context)
    if model not in hints:
        raise ModelNotFound(
            f"the model {model!r} does not exist here; GET /v1/models lists them "
            f"({DEFAULT_MODEL!r}: the prompt decides)",
            details={"field": "model"},
        )
    return hints[model]


# --- running a prompt -----------------------------------------------------------------------------------------------


async def _run_prompt(
    request: Request, prompt: str, image: bytes, model: str, overrides: Mapping[str, Any] | None = None
) -> tuple[Instruction, JobResult]:
    """Interpret, then run the job; ``overrides`` are options the client sent beside the prompt (``output_format``)."""
    settings = settings_of(request)
    context = job_context(settings)
    hint = _hint(request, model, context)
    instruction = await _interpreter(request, context).interpret(prompt, hint)
    if overrides:
        params = parse_job_params(instruction.task, {**instruction.fields(), **overrides}, context)
        instruction = dataclasses.replace(instruction, params=params)
    if refusal := render_over_budget(instruction.task, instruction.params, context, settings.sync_render_mp_steps):
        raise refusal  # an OpenAI answer has no room for a job: the caller submits it to /v1/jobs
    job = run_job(backend_of(request), instruction.task, image, instruction.params, context)
    result = await within_request_timeout(job, settings)
    return instruction, result


def _summary(prompt: str, instruction: Instruction, result: JobResult) -> str:
    """What was done, in the prompt's language (Chinese when it has Chinese characters)."""
    meta = result.meta
    english, chinese = job_entry(instruction.task).title
    options = ", ".join(f"{name}={value}" for name, value in instruction.fields().items())
    verdict = (meta.report or {}).get("verdict")
    if any("\u4e00" <= char <= "\u9fff" for char in prompt):
        text = f"已完成：{chinese}（{options or '默认选项'}）。引擎 {meta.engine}，{meta.faces} 张人脸，"
        text += f"{meta.width}×{meta.height} 像素"
        return text + (f"，合规检查：{'通过' if verdict == 'pass' else '未通过'}。" if verdict else "。")
    text = f"Done: {english} ({options or 'default options'}). Engine {meta.engine}, {meta.faces} face(s), "
    text += f"{meta.width}×{meta.height} px"
    return text + (f", compliance check: {verdict}." if verdict else ".")


def _data_url(body: bytes, media_type: str) -> str:
    return f"data:{media_type};base64,{base64.b64encode(body).decode('ascii')}"


def _portrait_extra(instruction: Instruction, result: JobResult) -> dict[str, Any]:
    """Our own fields beside OpenAI's: what was understood and the result's metadata (and the print sheet and HD
    copy, as ``sheet_b64``/``hd_b64``)."""
    extra = {**instruction.to_json(), "meta": result.meta.model_dump()}
    for name, data in result.companions().items():
        extra[f"{name}_b64"] = base64.b64encode(data).decode("ascii")
    return extra


# How the chat answer's Markdown names each companion image of a result (``JobResult.companions``).
_COMPANION_TITLES = {"sheet": "print sheet", "hd": "HD copy"}


# --- routes ---------------------------------------------------------------------------------------------------------

instructions_router = APIRouter(tags=["instructions"])
openai_router = APIRouter(tags=["openai-compatible"], route_class=OpenAIRoute)


@instructions_router.post("/v1/instructions", response_model=InstructionOut, max_body_size=INSTRUCTION_BODY_BYTES)
async def instructions(request: Request, body: InstructionIn) -> InstructionOut:
    """A plain-language request → the job and its params, valid for ``POST /v1/{task}`` as they are.

    A prompt naming no job, or several, is refused with 422 ``instruction_unclear``.
    """
    context = job_context(settings_of(request))
    hint = JobHint(body.task) if body.task else None
    if hint is not None and hint.task not in JOB_NAMES:
        raise InvalidParameter(f"unknown task {hint.task!r}; tasks: {', '.join(JOB_NAMES)}", details={"field": "task"})
    instruction = await _interpreter(request, context).interpret(body.prompt, hint)
    return InstructionOut.model_validate(instruction.to_json())


@openai_router.post("/v1/images/edits")
async def images_edits(request: Request) -> JSONResponse:
    """OpenAI Images API: multipart ``image`` and ``prompt`` (``model``, ``n``=1, ``response_format``=b64_json,
    ``output_format``) → ``{"created", "data": [{"b64_json", "revised_prompt"}], ...}``; ``revised_prompt`` says what
    was done, ``portrait`` holds the job, its params and the result's metadata."""
    settings = settings_of(request)
    upload = await read_upload(request, settings)
    fields = upload.fields
    if str(fields.get("n", "1")) != "1":
        raise InvalidParameter("n must be 1: one image per request", details={"field": "n"})
    if fields.get("response_format", "b64_json") != "b64_json":
        raise InvalidParameter(
            "response_format must be b64_json: the service keeps no files to link to",
            details={"field": "response_format"},
        )
    prompt = str(fields.get("prompt", ""))
    overrides = {"format": fields["output_format"]} if fields.get("output_format") else {}
    model = str(fields.get("model") or DEFAULT_MODEL)
    instruction, result = await _run_prompt(request, prompt, upload.data, model, overrides)
    return JSONResponse(
        {
            "created": int(time.time()),
            "data": [
                {
                    "b64_json": base64.b64encode(result.body).decode("ascii"),
                    "revised_prompt": _summary(prompt, instruction, result),
                }
            ],
            "output_format": result.media_type.removeprefix("image/"),
            "size": f"{result.meta.width}x{result.meta.height}",
            "portrait": _portrait_extra(instruction, result),
        },
        headers=result.headers(),
    )


@openai_router.post(
    "/v1/chat/completions",
    response_model=None,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": ChatRequest.model_json_schema()}},
        }
    },
)
async def chat_completions(request: Request) -> Response:
    """OpenAI Chat Completions: the last user message's text is the instruction, its ``image_url`` (a data URL) the
    photo; the answer's content is the result as a Markdown image plus what was done. ``stream: true`` → SSE."""
    settings = settings_of(request)
    body = await read_chat_request(request, settings)
    prompt, image_url = text_and_image_url(body.messages)
    if image_url is None:
        raise ImageRequired(
            "no photo: add an image_url part (data:image/jpeg;base64,...) to the user message",
            details=IN_MESSAGES,
        )
    image = await image_from_url(image_url, instructions_of(request), media_caps(settings.max_image_bytes, None))
    instruction, result = await _run_prompt(request, prompt, image, body.model)
    summary = _summary(prompt, instruction, result)
    content = f"![result]({_data_url(result.body, result.media_type)})\n\n{summary}"
    for name, data in result.companions().items():
        content += f"\n\n![{_COMPANION_TITLES[name]}]({_data_url(data, result.media_type)})"
    completion_id = f"chatcmpl-{uuid.uuid4().hex}"
    extra = _portrait_extra(instruction, result)
    if body.stream:
        return StreamingResponse(_stream(completion_id, body.model, content, extra), media_type="text/event-stream")
    return JSONResponse(
        {
            "id": completion_id,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                    "logprobs": None,
                }
            ],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
            "portrait": extra,
        },
        headers=result.headers(),
    )


async def _stream(completion_id: str, model: str, content: str, extra: dict[str, Any]) -> AsyncIterator[str]:
    """The finished answer as chunks: the role, the image, the summary, the stop (with our fields), ``[DONE]``."""
    image, _, rest = content.partition("\n\n")
    yield chat_chunk(completion_id, model, {"role": "assistant", "content": ""}, None)
    yield chat_chunk(completion_id, model, {"content": image}, None)
    yield chat_chunk(completion_id, model, {"content": "\n\n" + rest}, None)
    yield chat_chunk(completion_id, model, {}, "stop", portrait=extra)
    yield "data: [DONE]\n\n"


router = APIRouter()
router.include_router(instructions_router)
router.include_router(openai_router)
