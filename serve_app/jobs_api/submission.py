"""Reading ``POST /v1/jobs``: multipart (``task``, ``image``, options as fields), JSON (``{"task", "params",
"image_b64" | "input", "callback_url", "idempotency_key"}``) or a raw body; the upload streamed into a spool as it
arrives (``serve_app.streamed_uploads``: a large one to a temporary file, hashed on the way), never held whole."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from starlette.requests import Request

from deployments.common.errors import InvalidParameter
from serve_app.byte_caps import MediaCaps, media_caps
from serve_app.jobs_api.service import Submission
from serve_app.runner.jobs_config import JobsConfig
from serve_app.settings import Settings
from serve_app.streamed_uploads import FIELD, spool_upload
from serve_app.upload_spool import SpooledBody, UploadSpool, upload_spool
from serve_app.uploads import load_json
from storage.base import open_store, parse_location
from storage.errors import ObjectTooLarge
from storage.keys import validate_key


@asynccontextmanager
async def read_submission(request: Request, config: JobsConfig, settings: Settings) -> AsyncIterator[Submission]:
    """The job a request submits, read under the same caps, deadline and bytes-in-flight budget as the job routes';
    its upload (or ``input`` object) lives until the block ends, then its temporary file is deleted, whatever
    happened."""
    caps = media_caps(settings.max_image_bytes, settings.max_video_bytes)
    async with upload_spool(settings) as spool:
        upload = await spool_upload(request, spool, caps=caps, timeout_s=settings.body_timeout_s)
        fields = dict(upload.fields)
        if not upload.has_upload:
            if "input" not in fields or FIELD in fields:
                raise InvalidParameter(f"the JSON body needs a string field '{FIELD}'")
            await _read_input(str(fields.pop("input")), config, caps, spool)
        yield _submission(await spool.finish(), fields)


def _json_object(text: str) -> dict[str, Any]:
    payload = load_json(text.encode("utf-8"), "the field 'params'")
    if not isinstance(payload, dict):
        raise InvalidParameter("'params' must be an object of the job's options")
    return payload


def _submission(body: SpooledBody, fields: dict[str, Any]) -> Submission:
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
    return Submission(task, body, {**fields, **(nested or {})}, callback_url, idempotency_key)


class _SpoolWriter:
    """A file-like ``write`` into the spool, for a store's ``get_to`` (run in a worker thread)."""

    def __init__(self, spool: UploadSpool) -> None:
        self.write = spool.absorb


async def _read_input(name: str, config: JobsConfig, caps: MediaCaps, spool: UploadSpool) -> None:
    """``input``: a key in ``args.jobs.input_store``, or an s3:// URI inside it (never anywhere else), streamed into
    the spool."""
    if config.input_store is None:
        raise InvalidParameter("this service takes no 'input' keys (args.jobs.input_store is not set): send image_b64")
    store_uri = config.input_store.rstrip("/")
    key = name[len(store_uri) + 1 :] if name.startswith(store_uri + "/") else name
    if "://" in key:
        raise InvalidParameter(f"'input' must be a key in {store_uri}, or a URI inside it", details={"input": name})
    store = open_store(parse_location(store_uri), config.s3)
    try:
        await asyncio.to_thread(store.get_to, validate_key(key), _SpoolWriter(spool), max_bytes=caps.most_bytes)
    except ObjectTooLarge as exc:
        raise caps.object_refusal(exc) from exc
    # checked against its own kind's cap by check_media
