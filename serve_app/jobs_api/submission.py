"""Reading ``POST /v1/jobs``: multipart (``task``, ``image``, options as fields) or JSON (``{"task", "params",
"image_b64" | "input", "callback_url", "idempotency_key"}``); the image through the same reader as the job routes."""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request

from deployments.common.errors import InvalidParameter
from serve_app.byte_caps import MediaCaps, media_caps
from serve_app.jobs_api.service import Submission
from serve_app.runner.jobs_config import JobsConfig
from serve_app.settings import Settings
from serve_app.uploads import UploadCap, json_upload, load_json, media_type, read_body, read_upload
from storage.base import open_store, parse_location
from storage.errors import ObjectTooLarge
from storage.keys import validate_key


async def read_submission(request: Request, config: JobsConfig, settings: Settings) -> Submission:
    """The job a request submits; the body read under the same cap and deadline as the job routes'."""
    content_type = media_type(request)
    if content_type != "application/json":
        upload = await read_upload(request, settings, videos=True)  # a job may be a video
        return _submission(upload.data, dict(upload.fields))
    caps = media_caps(settings.max_image_bytes, settings.max_video_bytes)
    body = await read_body(request, cap=UploadCap(caps, content_type), timeout_s=settings.body_timeout_s)
    payload = await asyncio.to_thread(load_json, body, "the JSON body")  # base64 at the cap: parsed off the loop
    if isinstance(payload, dict) and "input" in payload and "image_b64" not in payload:
        data = await _read_input(str(payload.pop("input")), config, caps)
        return _submission(data, {**dict(request.query_params), **payload})
    upload = await asyncio.to_thread(json_upload, body, dict(request.query_params))
    return _submission(upload.data, dict(upload.fields))


def _json_object(text: str) -> dict[str, Any]:
    payload = load_json(text.encode("utf-8"), "the field 'params'")
    if not isinstance(payload, dict):
        raise InvalidParameter("'params' must be an object of the job's options")
    return payload


def _submission(data: bytes, fields: dict[str, Any]) -> Submission:
    task = fields.pop("task", None)
    if not isinstance(task, str) or not task:
        raise InvalidParameter("name the job: field 'task' (restore, idphoto, cartoon...)")
    callback_url = fields.pop("callback_url", None)
    idempotency_key = fields.pop("idempotency_key", None)
    nested = fields.pop("params", None)
    if isinstance(nested, str):  # a multipart form may carry the options as one JSON field
        nested = _json_object(nested)
    if nested is not None and not isinstance(nested, dict):
        raise InvalidParameter("'params' must be an object of the job's options")
    for name, value in (("callback_url", callback_url), ("idempotency_key", idempotency_key)):
        if value is not None and (not isinstance(value, str) or not 0 < len(value) <= 2048):
            raise InvalidParameter(f"'{name}' must be a string of 1 to 2048 characters")
    return Submission(task, data, {**fields, **(nested or {})}, callback_url, idempotency_key)


async def _read_input(name: str, config: JobsConfig, caps: MediaCaps) -> bytes:
    """``input``: a key in ``args.jobs.input_store``, or an s3:// URI inside it (never anywhere else)."""
    if config.input_store is None:
        raise InvalidParameter("this service takes no 'input' keys (args.jobs.input_store is not set): send image_b64")
    store_uri = config.input_store.rstrip("/")
    key = name[len(store_uri) + 1 :] if name.startswith(store_uri + "/") else name
    if "://" in key:
        raise InvalidParameter(f"'input' must be a key in {store_uri}, or a URI inside it", details={"input": name})
    store = open_store(parse_location(store_uri), config.s3)
    try:
        stored = await asyncio.to_thread(store.get, validate_key(key), max_bytes=caps.most_bytes)
    except ObjectTooLarge as exc:
        raise caps.object_refusal(exc) from exc
    return stored.data  # checked against its own kind's cap by check_media
