"""The OpenAI-compatible surface on the wire: request bodies, the errors it adds, errors in OpenAI's shape
(``{"error": {"message", "type", "param", "code"}}``, converted from what the app's own handlers answer, so every
route reports the same codes) and the chunks of a streamed chat answer. Routes: :mod:`serve_app.openai_api`.

(No ``from __future__ import annotations``: FastAPI resolves the annotations of these models at run time.)
"""

import json
import time
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field

from deployments.common.errors import InputError
from serve_app.registry import JOB_NAMES, JobName

DEFAULT_MODEL = "portrait"
IN_MESSAGES = {"field": "messages"}  # where a chat request's problem lies (OpenAI's error "param")


class ImageRequired(InputError):
    code = "image_required"
    http_status = 400


class RemoteImageRefused(InputError):
    code = "remote_image_refused"
    http_status = 400


class ModelNotFound(InputError):
    code = "model_not_found"
    http_status = 404


class InstructionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prompt: str = Field(description="what the user wants, e.g. 蓝底一寸证件照, 'restore and upscale 2x'")
    task: str | None = Field(
        None, description=f"a job already chosen ({', '.join(JOB_NAMES)}); the prompt then sets options"
    )


class InstructionOut(BaseModel):
    task: JobName
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


def chat_chunk(completion_id: str, model: str, delta: dict[str, Any], finish: str | None, **extra: Any) -> str:
    chunk = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        **extra,
    }
    return f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n"
