"""Reading ``POST /v1/jobs``: multipart (``task``, ``image``, options as fields) or JSON (``{"task", "params",
"image_b64" | "input", "callback_url", "idempotency_key"}``); the image through the same reader as the job routes."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from starlette.requests import Request

from deployments.common.errors import ImageTooLarge, InvalidParameter
from serve_app.jobs_api.config import JobsConfig
from serve_app.jobs_api.service import Submission
from serve_app.uploads import read_upload
from storage.base import open_store, parse_location
from storage.keys import validate_key

MAX_JSON_WITHOUT_IMAGE_BYTES = 64 * 1024
_BASE64_GROWTH = 4 / 3


async def read_submission(request: Request, config: JobsConfig, *, max_bytes: int) -> Submission:
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type == "application/json":
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > max_bytes * _BASE64_GROWTH + MAX_JSON_WITHOUT_IMAGE_BYTES:
            raise ImageTooLarge(f"the request has {declared} bytes; the image limit is {max_bytes}")
        payload = _json_object(await request.body())
        if "input" in payload and "image_b64" not in payload:
            data = await _read_input(str(payload.pop("input")), config, max_bytes)
            return _submission(data, {**dict(request.query_params), **payload})
    upload = await read_upload(request, max_bytes=max_bytes)
    return _submission(upload.data, dict(upload.fields))


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        payload = json.loads(body or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise InvalidParameter(f"the JSON body cannot be parsed: {exc}") from None
    if not isinstance(payload, dict):
        raise InvalidParameter("the JSON body must be an object: {task, params, image_b64 | input, ...}")
    return payload


def _submission(data: bytes, fields: dict[str, Any]) -> Submission:
    task = fields.pop("task", None)
    if not isinstance(task, str) or not task:
        raise InvalidParameter("name the job: field 'task' (restore, idphoto, cartoon...)")
    callback_url = fields.pop("callback_url", None)
    idempotency_key = fields.pop("idempotency_key", None)
    nested = fields.pop("params", None)
    if isinstance(nested, str):  # a multipart form may carry the options as one JSON field
        nested = _json_object(nested.encode())
    if nested is not None and not isinstance(nested, dict):
        raise InvalidParameter("'params' must be an object of the job's options")
    for name, value in (("callback_url", callback_url), ("idempotency_key", idempotency_key)):
        if value is not None and (not isinstance(value, str) or not 0 < len(value) <= 2048):
            raise InvalidParameter(f"'{name}' must be a string of 1 to 2048 characters")
    return Submission(task, data, {**fields, **(nested or {})}, callback_url, idempotency_key)


async def _read_input(name: str, config: JobsConfig, max_bytes: int) -> bytes:
    """``input``: a key in ``args.jobs.input_store``, or an s3:// URI inside it (never anywhere else)."""
    if config.input_store is None:
        raise InvalidParameter("this service takes no 'input' keys (args.jobs.input_store is not set): send image_b64")
    store_uri = config.input_store.rstrip("/")
    key = name[len(store_uri) + 1 :] if name.startswith(store_uri + "/") else name
    if "://" in key:
        raise InvalidParameter(f"'input' must be a key in {store_uri}, or a URI inside it", details={"input": name})
    store = open_store(parse_location(store_uri), config.s3)
    stored = await asyncio.to_thread(store.get, validate_key(key), max_bytes=max_bytes)
    return stored.data
