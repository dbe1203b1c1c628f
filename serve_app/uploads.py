"""Reading an image upload from any of the three request shapes the API accepts.

- ``multipart/form-data``: the file in field ``image``, options as other form fields;
- ``application/json``: ``{"image_b64": "...", ...options}`` (a ``data:`` URL prefix is accepted);
- a raw body of image bytes (``image/*`` or ``application/octet-stream``), options in the query string.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Any

from starlette.datastructures import UploadFile
from starlette.requests import Request

from deployments.common.errors import ImageTooLarge, InvalidParameter


@dataclass(frozen=True)
class Upload:
    data: bytes
    filename: str | None
    fields: dict[str, Any] = field(default_factory=dict)


async def read_upload(request: Request, *, max_bytes: int) -> Upload:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_bytes + 1_000_000:
        raise ImageTooLarge(f"the request has {declared} bytes; the image limit is {max_bytes}")
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    query = dict(request.query_params)
    if content_type == "multipart/form-data":
        return await _read_multipart(request, query)
    if content_type == "application/json":
        return _read_json(await request.body(), query)
    data = await request.body()
    if not data:
        raise InvalidParameter("send the image as multipart field 'image', as JSON 'image_b64', or as the raw body")
    return Upload(data=data, filename=None, fields=query)


async def _read_multipart(request: Request, query: dict[str, Any]) -> Upload:
    form = await request.form()
    image = form.get("image")
    if not isinstance(image, UploadFile):
        raise InvalidParameter("the multipart form has no file field 'image'")
    fields = {**query, **{key: value for key, value in form.items() if key != "image" and isinstance(value, str)}}
    return Upload(data=await image.read(), filename=image.filename, fields=fields)


def _read_json(body: bytes, query: dict[str, Any]) -> Upload:
    try:
        payload = json.loads(body or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidParameter(f"the JSON body cannot be parsed: {exc}") from exc
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
