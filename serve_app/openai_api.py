"""Plain-language routes: ``POST /v1/instructions`` (ours), and the OpenAI-compatible surface, so existing clients (the
official ``openai`` SDK with ``base_url=http://HOST:8000/v1``) work unchanged:

- ``POST /v1/images/edits``: multipart ``image`` + ``prompt`` → the job the prompt asks for, in the Images API shape;
- ``POST /v1/chat/completions``: a user message with text and an ``image_url`` → an assistant message holding the
  result as a Markdown image (data URL) and what was done; ``stream: true`` answers as server-sent events;
- ``GET /v1/models`` (the route lives in ``routes.py``): :func:`openai_model_list` makes it an OpenAI model list too.

A client's ``model`` is ``portrait`` (the prompt decides), a job (``restore``, ``idphoto``, ``cartoon``) or a specific
model of a job (``gpen-bfr-256``, ``dctnet-sketch-head``). Errors on the OpenAI routes have OpenAI's shape
(``{"error": {"message", "type", "param", "code"}}``), built from the same handlers as every other route. No Ray.
(No ``from __future__ import annotations``: FastAPI resolves the route annotations at run time.)
"""

import asyncio
import base64
import binascii
import dataclasses
import json
import logging
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from typing import Any, Literal

from fastapi import APIRouter, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from deployments.cartoon.styles import cartoon_styles
from deployments.common.errors import ImageTooLarge, InputError, InvalidParameter, ServiceError
from deployments.common.weights import ModelSpec
from serve_app.backend import Backend
from serve_app.instructions import Instruction, InstructionEngine, InstructionsConfig, JobHint, build_engine
from serve_app.instructions.vocabulary import enum_values
from serve_app.jobs import JOBS, JobContext, job_context, parse_job_params, run_job
from serve_app.jobs.results import JobResult
from serve_app.settings import Settings, get_settings
from serve_app.uploads import read_upload

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "portrait"
OWNER = "portrait-serve"
CREATED = int(time.time())  # when this process started: the "created" of every model it lists
_BASE64_GROWTH = 4 / 3
_FORM_OVERHEAD_BYTES = 1_000_000
_IN_MESSAGES = {"field": "messages"}  # where a chat request's problem lies (OpenAI's error "param")
_JOB_NAMES = {
    "restore": ("photo restoration", "照片修复"),
    "idphoto": ("ID photo", "证件照"),
    "cartoon": ("cartoon", "卡通"),
}


class ImageRequired(InputError):
    code = "image_required"
    http_status = 400


class RemoteImageRefused(InputError):
    code = "remote_image_refused"
    http_status = 400


class ModelNotFound(InputError):
    code = "model_not_found"
    http_status = 404


# --- wire models ----------------------------------------------------------------------------------------------------


class InstructionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prompt: str = Field(description="what the user wants, e.g. 蓝底一寸证件照, 'restore and upscale 2x'")
    task: str | None = Field(
        None, description="a job already chosen (restore, idphoto, cartoon); the prompt then sets options"
    )


class InstructionOut(BaseModel):
    task: Literal["restore", "idphoto", "cartoon"]
    params: dict[str, Any] = Field(description="valid as they are for the job's route (POST /v1/{task})")
    engine: str = Field(description="rules, llm, or rules-fallback (the language model failed; the notes say why)")
    notes: list[str] = Field(description="what was understood, and from which words")


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str
    content: str | list[dict[str, Any]] | None = None


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str = DEFAULT_MODEL
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    n: int = Field(1, ge=1, le=1, description="one answer per request")


# --- errors in OpenAI's shape ---------------------------------------------------------------------------------------


class OpenAIRoute(APIRoute):
    """Answers errors in OpenAI's shape, converted from what the app's own error handlers answer."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            try:
                return await handler(request)
            except Exception as exc:
                native = await _native_error_response(request, exc)
                return _openai_error(native)

        return route


async def _native_error_response(request: Request, exc: Exception) -> Response:
    handlers = request.app.exception_handlers
    for kind in type(exc).__mro__:
        if kind in handlers:
            return await handlers[kind](request, exc)
    raise exc


def _openai_error(native: Response) -> JSONResponse:
    error = json.loads(bytes(native.body))["error"]
    details = error.get("details") or {}
    problems = details.get("problems") or [{}]
    body = {
        "message": error["message"],
        "type": "invalid_request_error" if native.status_code < 500 else "server_error",
        "param": details.get("field") or problems[0].get("field") or None,
        "code": error["code"],
    }
    if "request_id" in error:
        body["request_id"] = error["request_id"]
    headers = {key: value for key, value in native.headers.items() if key.lower() in ("retry-after", "x-request-id")}
    return JSONResponse({"error": body}, status_code=native.status_code, headers=headers)


# --- app state ------------------------------------------------------------------------------------------------------


def _backend(request: Request) -> Backend:
    backend = getattr(request.app.state, "backend", None)
    if backend is None:
        raise ServiceError("the service is starting: no backend is attached yet")
    return backend


def _settings(request: Request) -> Settings:
    return getattr(request.app.state, "settings", None) or get_settings()


def _config(request: Request) -> InstructionsConfig:
    return getattr(request.app.state, "instructions", None) or InstructionsConfig()


def _engine(request: Request, context: JobContext) -> InstructionEngine:
    """Built once per app from ``app.state.instructions`` (the Serve YAML's ``args.instructions``)."""
    engine = getattr(request.app.state, "instruction_engine", None)
    if engine is None:
        engine = request.app.state.instruction_engine = build_engine(_config(request), context)
    return engine


# --- models ---------------------------------------------------------------------------------------------------------


def model_hints(manifest: Mapping[str, ModelSpec], context: JobContext) -> dict[str, JobHint | None]:
    """Every ``model`` a client may send: ``portrait`` (None: the prompt decides), each job, and each model that fixes
    an option of a job (a value of its params model's ``model`` option; a cartoon style's head and whole-image models).
    """
    hints: dict[str, JobHint | None] = {DEFAULT_MODEL: None}
    hints.update({task: JobHint(task) for task in JOBS})
    for task, kind in JOBS.items():
        hints.update(
            {model_id: JobHint(task, {"model": model_id}) for model_id in enum_values(kind.params_model, "model")}
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
    hints = model_hints(_settings(request).open_model_store().manifest, context)
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
    context = job_context(_settings(request))
    hint = _hint(request, model, context)
    instruction = await _engine(request, context).interpret(prompt, hint)
    if overrides:
        params = parse_job_params(instruction.task, {**instruction.fields(), **overrides}, context)
        instruction = dataclasses.replace(instruction, params=params)
    result = await run_job(_backend(request), instruction.task, image, instruction.params, context)
    return instruction, result


def _summary(prompt: str, instruction: Instruction, result: JobResult) -> str:
    """What was done, in the prompt's language (Chinese when it has Chinese characters)."""
    meta = result.meta
    english, chinese = _JOB_NAMES.get(instruction.task, (instruction.task, instruction.task))
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
    """Our own fields beside OpenAI's: what was understood and the result's metadata (and the print sheet)."""
    extra = {**instruction.to_json(), "meta": result.meta.model_dump()}
    if result.sheet is not None:
        extra["sheet_b64"] = base64.b64encode(result.sheet).decode("ascii")
    return extra


# --- chat messages --------------------------------------------------------------------------------------------------


def _text_and_image_url(messages: list[ChatMessage]) -> tuple[str, str | None]:
    """The last user message's text, and the newest image any user message holds."""
    users = [message for message in messages if message.role == "user"]
    if not users:
        raise InvalidParameter("the messages hold no user message", details=_IN_MESSAGES)
    image_url = None
    for message in reversed(users):
        image_url = next((url for url in reversed(_image_urls(message)) if url), None)
        if image_url:
            break
    content = users[-1].content
    if isinstance(content, str) or content is None:
        return content or "", image_url
    return "\n".join(str(part.get("text", "")) for part in content if part.get("type") == "text"), image_url


def _image_urls(message: ChatMessage) -> list[str]:
    if not isinstance(message.content, list):
        return []
    urls = []
    for part in message.content:
        if part.get("type") == "image_url":
            image_url = part.get("image_url")
            urls.append(image_url.get("url") if isinstance(image_url, Mapping) else image_url)
    return [url for url in urls if isinstance(url, str)]


async def _image_from_url(url: str, config: InstructionsConfig, max_bytes: int) -> bytes:
    if url.startswith("data:"):
        header, _, encoded = url.partition(",")
        if not header.endswith(";base64"):
            raise InvalidParameter(
                "an image data URL must be base64 (data:image/jpeg;base64,...)", details=_IN_MESSAGES
            )
        if len(encoded) > max_bytes * _BASE64_GROWTH + 4:
            raise ImageTooLarge(f"the image data URL holds more than {max_bytes} bytes")
        try:
            return base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise InvalidParameter(f"the image data URL is not valid base64: {exc}", details=_IN_MESSAGES) from None
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme not in ("http", "https"):
        raise InvalidParameter("image_url must be a data: URL (or an http(s) URL where allowed)", details=_IN_MESSAGES)
    if "*" not in config.image_url_hosts and parsed.hostname not in config.image_url_hosts:
        raise RemoteImageRefused(
            f"images are not fetched from {parsed.hostname}: send the photo as a data URL "
            "(data:image/jpeg;base64,...) in the image_url part",
            details={**_IN_MESSAGES, "allowed_hosts": list(config.image_url_hosts)},
        )
    return await asyncio.to_thread(_fetch, url, config.image_fetch_timeout_s, max_bytes)


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect could lead away from the allowed host (to an internal address): answered as the error it is."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_IMAGE_FETCHER = urllib.request.build_opener(_NoRedirects)


def _fetch(url: str, timeout_s: float, max_bytes: int) -> bytes:
    """An allowed remote image, read up to the image limit (blocking; run in a worker thread); no redirects."""
    try:
        with _IMAGE_FETCHER.open(url, timeout=timeout_s) as reply:
            data = reply.read(max_bytes + 1)
    except (urllib.error.URLError, TimeoutError) as exc:
        reason = getattr(exc, "reason", exc)
        raise InvalidParameter(f"the image at {url} cannot be fetched: {reason}", details=_IN_MESSAGES) from None
    if len(data) > max_bytes:
        raise ImageTooLarge(f"the image at {url} has more than {max_bytes} bytes")
    return data


async def _chat_request(request: Request, max_bytes: int) -> ChatRequest:
    """The body, refused by its declared size before it is read (a photo travels base64 inside it)."""
    declared = request.headers.get("content-length")
    limit = max_bytes * _BASE64_GROWTH + _FORM_OVERHEAD_BYTES
    if declared and declared.isdigit() and int(declared) > limit:
        raise ImageTooLarge(f"the request has {declared} bytes; the image limit is {max_bytes}")
    try:
        return ChatRequest.model_validate_json(await request.body())
    except ValidationError as exc:
        raise RequestValidationError(exc.errors(include_url=False, include_context=False)) from None


def _chunk(completion_id: str, model: str, delta: dict[str, Any], finish: str | None, **extra: Any) -> str:
    chunk = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        **extra,
    }
    return f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n"


# --- routes ---------------------------------------------------------------------------------------------------------

instructions_router = APIRouter(tags=["instructions"])
openai_router = APIRouter(tags=["openai-compatible"], route_class=OpenAIRoute)


@instructions_router.post("/v1/instructions", response_model=InstructionOut)
async def instructions(request: Request, body: InstructionIn) -> InstructionOut:
    """A plain-language request → the job and its params, valid for ``POST /v1/{task}`` as they are.

    A prompt naming no job, or several, is refused with 422 ``instruction_unclear``.
    """
    context = job_context(_settings(request))
    hint = JobHint(body.task) if body.task else None
    if hint is not None and hint.task not in JOBS:
        raise InvalidParameter(f"unknown task {hint.task!r}; tasks: {', '.join(JOBS)}", details={"field": "task"})
    instruction = await _engine(request, context).interpret(body.prompt, hint)
    return InstructionOut.model_validate(instruction.to_json())


@openai_router.post("/v1/images/edits")
async def images_edits(request: Request) -> JSONResponse:
    """OpenAI Images API: multipart ``image`` and ``prompt`` (``model``, ``n``=1, ``response_format``=b64_json,
    ``output_format``) → ``{"created", "data": [{"b64_json", "revised_prompt"}], ...}``; ``revised_prompt`` says what
    was done, ``portrait`` holds the job, its params and the result's metadata."""
    settings = _settings(request)
    upload = await read_upload(request, max_bytes=settings.max_image_bytes)
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
    settings = _settings(request)
    body = await _chat_request(request, settings.max_image_bytes)
    prompt, image_url = _text_and_image_url(body.messages)
    if image_url is None:
        raise ImageRequired(
            "no photo: add an image_url part (data:image/jpeg;base64,...) to the user message",
            details=_IN_MESSAGES,
        )
    image = await _image_from_url(image_url, _config(request), settings.max_image_bytes)
    instruction, result = await _run_prompt(request, prompt, image, body.model)
    summary = _summary(prompt, instruction, result)
    content = f"![result]({_data_url(result.body, result.media_type)})\n\n{summary}"
    if result.sheet is not None:
        content += f"\n\n![print sheet]({_data_url(result.sheet, result.media_type)})"
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
    yield _chunk(completion_id, model, {"role": "assistant", "content": ""}, None)
    yield _chunk(completion_id, model, {"content": image}, None)
    yield _chunk(completion_id, model, {"content": "\n\n" + rest}, None)
    yield _chunk(completion_id, model, {}, "stop", portrait=extra)
    yield "data: [DONE]\n\n"


router = APIRouter()
router.include_router(instructions_router)
router.include_router(openai_router)
