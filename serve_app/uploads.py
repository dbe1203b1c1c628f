"""Reading request bodies, and an image upload from any of the three request shapes the API accepts.

- ``multipart/form-data``: the file in field ``image``, options as other form fields;
- ``application/json``: ``{"image_b64": "...", ...options}`` (a ``data:`` URL prefix is accepted);
- a raw body of image bytes (``image/*`` or ``application/octet-stream``), options in the query string.

Every body is read as a stream under a running byte cap and one deadline for the whole read: a body (chunked, or a
multipart part) is refused with 413 as soon as it passes the cap, never read whole first, and a client that drips
its bytes holds a request slot no longer than ``body_timeout_s`` (408). The cap allows for the shape's own growth:
base64 in JSON is 4/3 of the image, a form carries boundaries and option fields.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from starlette.datastructures import FormData, UploadFile
from starlette.requests import Request
from starlette.types import Message

from deployments.common.errors import ImageTooLarge, InputError, InvalidParameter
from serve_app.settings import Settings

BASE64_GROWTH = 4 / 3
FORM_OVERHEAD_BYTES = 1_000_000  # multipart boundaries and option fields; JSON keys and options around the image
MAX_FORM_FILES = 4  # an OpenAI edits request may carry a mask beside the image; we read `image` only
MAX_FORM_FIELDS = 64
# The file fields a form may carry: the photo (or a video job's "video") and OpenAI's edit mask, which we do not use.
FILE_FIELDS = frozenset({"image", "video", "mask"})


class BodyTimeout(InputError):
    code = "body_timeout"
    http_status = 408


@dataclass(frozen=True)
class Upload:
    data: bytes
    filename: str | None
    fields: dict[str, Any] = field(default_factory=dict)


def media_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


def body_limit_bytes(content_type: str, max_image_bytes: int) -> int:
    """The most bytes a body of ``content_type`` may hold when it carries one image of ``max_image_bytes``."""
    if content_type == "application/json":
        return int(max_image_bytes * BASE64_GROWTH) + 4 + FORM_OVERHEAD_BYTES
    if content_type == "multipart/form-data":
        return max_image_bytes + FORM_OVERHEAD_BYTES
    return max_image_bytes


async def read_body(
    request: Request, *, limit_bytes: int, timeout_s: float, too_large: type[InputError] = ImageTooLarge
) -> bytes:
    """The whole body, read chunk by chunk: ``too_large`` (413) once it passes ``limit_bytes`` (or declares more),
    :class:`BodyTimeout` (408) when it has not all arrived within ``timeout_s``."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit_bytes:
        raise too_large(
            f"the request declares {declared} bytes; the limit is {limit_bytes}", details={"max_bytes": limit_bytes}
        )
    body = bytearray()
    try:
        async with asyncio.timeout(timeout_s):
            async for chunk in request.stream():
                body += chunk
                if len(body) > limit_bytes:
                    raise too_large(
                        f"the request has more than {limit_bytes} bytes; refused at the limit",
                        details={"max_bytes": limit_bytes},
                    )
    except TimeoutError:
        raise BodyTimeout(
            f"the request body did not arrive within {timeout_s:g} s ({len(body)} bytes by then)",
            details={"timeout_s": timeout_s},
        ) from None
    return bytes(body)


def load_json(body: bytes, what: str) -> Any:
    """``body`` parsed, or 422 naming ``what``: not JSON, not UTF-8, or nested past the parser's depth."""
    try:
        return json.loads(body or b"null")
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        reason = "it is nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise InvalidParameter(f"{what} cannot be parsed: {reason}") from None


async def read_upload(request: Request, settings: Settings, *, max_bytes: int | None = None) -> Upload:
    """The image (or, for ``POST /v1/jobs``, the video: ``max_bytes``) and the options of a request."""
    content_type = media_type(request)
    body = await read_body(
        request,
        limit_bytes=body_limit_bytes(content_type, max_bytes or settings.max_image_bytes),
        timeout_s=settings.body_timeout_s,
    )
    query = dict(request.query_params)
    if content_type == "multipart/form-data":
        return await _read_multipart(request, body, query)
    if content_type == "application/json":
        return await asyncio.to_thread(json_upload, body, query)  # ~0.7 s of parsing and base64 at the cap
    if not body:
        raise InvalidParameter("send the image as multipart field 'image', as JSON 'image_b64', or as the raw body")
    return Upload(data=body, filename=None, fields=query)


async def _read_multipart(request: Request, body: bytes, query: dict[str, Any]) -> Upload:
    async with parsed_form(request, body) as form:
        image = form.get("image") or form.get("video")  # a video job may name its file field "video"
        if not isinstance(image, UploadFile):
            raise InvalidParameter("the multipart form has no file field 'image'")
        extra_files = sorted({key for key, value in form.multi_items() if isinstance(value, UploadFile)} - FILE_FIELDS)
        if extra_files:
            # An option sent as a file (``background_image`` as a picture) would otherwise vanish unread.
            raise InvalidParameter(
                f"{extra_files[0]}: a file is read only from field 'image'; options are text fields",
                details={"field": extra_files[0]},
            )
        fields = {**query, **{key: value for key, value in form.items() if isinstance(value, str)}}
        return Upload(data=await image.read(), filename=image.filename, fields=fields)


@asynccontextmanager
async def parsed_form(request: Request, body: bytes) -> AsyncIterator[FormData]:
    """The form (multipart or urlencoded) parsed from the body already read and capped: a request that replays it
    is what Starlette parses. A text field may be as large as the body cap allows (an image sent as base64)."""
    replayed = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> Message:
        return replayed.pop() if replayed else {"type": "http.disconnect"}

    form_request = Request(request.scope, receive)
    async with form_request.form(
        max_files=MAX_FORM_FILES, max_fields=MAX_FORM_FIELDS, max_part_size=max(len(body), 1)
    ) as form:
        yield form


def json_upload(body: bytes, query: dict[str, Any]) -> Upload:
    """The image and options of a JSON body already read (``read_upload``, and the jobs API's JSON submissions)."""
    payload = load_json(body, "the JSON body")
    if not isinstance(payload, dict) or not isinstance(payload.get("image_b64"), str):
        raise InvalidParameter("the JSON body needs a string field 'image_b64'")
    encoded = payload.pop("image_b64")
    if encoded.startswith("data:"):
        encoded = encoded.partition(",")[2]
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidParameter(f"'image_b64' is not valid base64: {exc}") from exc
    return Upload(data=data, filename=payload.pop("filename", None), fields={**query, **payload})
