"""Reading request bodies, and an image upload from any of the three request shapes the API accepts.

- ``multipart/form-data``: the file in field ``image``, options as other form fields;
- ``application/json``: ``{"image_b64": "...", ...options}`` (a ``data:`` URL prefix is accepted);
- a raw body of image bytes (``image/*`` or ``application/octet-stream``), options in the query string.

Every body is read as a stream under a running byte cap and one deadline for the whole read: a body (chunked, or a
multipart part) is refused with 413 as soon as it passes the cap, never read whole first, and a client that drips
its bytes holds a request slot no longer than ``body_timeout_s`` (408). The cap allows for the shape's own growth:
base64 in JSON is 4/3 of the image, a form carries boundaries and option fields. Its bytes count against the
process's bytes in flight as they arrive (``serve_app.upload_budget``: 503 ``overloaded`` past them).

The synchronous routes read a photo whole here (``read_upload``: at most the photo cap); ``POST /v1/jobs``, whose
upload may be a 512 MiB video, streams it into a spool instead (``serve_app.streamed_uploads``).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from starlette.datastructures import FormData, UploadFile
from starlette.requests import Request
from starlette.types import Message

from deployments.common.errors import InputError, InvalidParameter
from serve_app.byte_caps import SNIFF_BYTES, MediaCaps, media_caps
from serve_app.settings import Settings
from serve_app.upload_budget import request_bytes

BASE64_GROWTH = 4 / 3
FORM_OVERHEAD_BYTES = 1_000_000  # multipart boundaries and option fields; JSON keys and options around the image
MAX_FORM_FILES = 4  # an OpenAI edits request may carry a mask beside the image; we read `image` only
MAX_FORM_FIELDS = 64
# The file fields a form may carry: the photo (or a video job's "video") and OpenAI's edit mask, which we do not use.
FILE_FIELDS = frozenset({"image", "video", "mask"})
SNIFF_WITHIN_BYTES = FORM_OVERHEAD_BYTES  # where a body's upload must begin for its kind to be told from its bytes
_SNIFF_BASE64 = -(-SNIFF_BYTES // 3) * 4  # whole base64 quanta that hold the first SNIFF_BYTES
_FORM_FILE = re.compile(  # the header block of the file part (HivisionIDPhotos' API names it input_image)
    rb'content-disposition:[^\r\n]*name="(?:image|video|input_image)"[^\r\n]*\r\n(?:[^\r\n]+\r\n)*\r\n', re.I
)
_JSON_DATA = re.compile(rb'"(?:image_b64|url)"\s*:\s*"(?:data:[^,"]{0,200},)?')


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


class BodyCap(Protocol):
    """How many bytes a body may hold, which may depend on what its first bytes show, and the refusal past it."""

    @property
    def most_bytes(self) -> int: ...

    def limit_bytes(self, start: bytes) -> int | None:
        """The cap of a body beginning with ``start``; None while those bytes do not tell yet."""
        ...

    def refusal(self, start: bytes, found: str) -> InputError: ...


@dataclass(frozen=True)
class FixedCap:
    """One cap whatever the body holds (a bucket notification)."""

    most_bytes: int
    error: type[InputError]

    def limit_bytes(self, start: bytes) -> int:
        return self.most_bytes

    def refusal(self, start: bytes, found: str) -> InputError:
        return self.error(f"{found}; the limit is {self.most_bytes}", details={"max_bytes": self.most_bytes})


@dataclass(frozen=True)
class UploadCap:
    """The cap of a body of ``content_type`` carrying one upload: its kind's (``serve_app.byte_caps``), sniffed from
    the upload's first bytes as they arrive, plus the shape's growth; the largest until they do."""

    caps: MediaCaps
    content_type: str
    base64_fields: bool = False  # a form whose text field may carry the upload as base64 (HivisionIDPhotos' API)

    @property
    def most_bytes(self) -> int:
        return self._body_bytes(self.caps.most_bytes)

    def limit_bytes(self, start: bytes) -> int | None:
        head = upload_head(start, self.content_type)
        if head is None and len(start) < SNIFF_WITHIN_BYTES:
            return None
        return self._body_bytes(self.caps.cap_for(head or b"").max_bytes)

    def _body_bytes(self, upload_bytes: int) -> int:
        return body_limit_bytes("application/json" if self.base64_fields else self.content_type, upload_bytes)

    def refusal(self, start: bytes, found: str) -> InputError:
        return self.caps.cap_for(upload_head(start, self.content_type) or b"").refusal(found)


def upload_head(start: bytes, content_type: str) -> bytes | None:
    """The first ``SNIFF_BYTES`` of the upload a body beginning with ``start`` carries: a raw body's own, the file
    field's of a form, the decoded ``image_b64`` (or data URL) of JSON; None until they have arrived."""
    if content_type == "application/json":
        return _json_head(start)
    offset = 0
    if content_type == "multipart/form-data":
        found = _FORM_FILE.search(start)
        if found is None:
            return None
        offset = found.end()
    head = start[offset : offset + SNIFF_BYTES]
    return head if len(head) == SNIFF_BYTES else None


def _json_head(start: bytes) -> bytes | None:
    found = _JSON_DATA.search(start)
    return base64_head(start[found.end() :]) if found else None


def base64_head(encoded: bytes) -> bytes | None:
    """The first ``SNIFF_BYTES`` of what ``encoded`` (base64, perhaps cut short) holds; None until enough of it is
    there."""
    encoded = encoded[:_SNIFF_BASE64]
    if len(encoded) < _SNIFF_BASE64:
        return None
    try:
        return base64.b64decode(encoded, validate=True)[:SNIFF_BYTES]
    except (binascii.Error, ValueError):
        return b""  # not base64 (an http URL, JSON escapes): nothing tells its kind, so a photo's cap


async def read_body(request: Request, *, cap: BodyCap, timeout_s: float) -> bytes:
    """The whole body in memory, read under ``stream_body``'s cap, deadline and bytes-in-flight budget."""
    body = bytearray()

    async def keep(chunk: bytes) -> None:
        body.extend(chunk)

    await stream_body(request, cap=cap, timeout_s=timeout_s, sink=keep)
    return bytes(body)


async def stream_body(
    request: Request, *, cap: BodyCap, timeout_s: float, sink: Callable[[bytes], Awaitable[None]]
) -> int:
    """Hand the body to ``sink`` chunk by chunk, never holding it here; its size. ``cap.refusal`` (413) once it
    passes its cap (or declares more: then after its first bytes, at most ``SNIFF_WITHIN_BYTES``, tell what it
    carries), :class:`BodyTimeout` (408) when it has not all arrived within ``timeout_s``, 503 ``overloaded`` when
    its bytes, reserved as they arrive, do not fit the process's bytes in flight (``serve_app.upload_budget``)."""
    declared = request.headers.get("content-length", "")
    declared_bytes = int(declared) if declared.isdigit() else None
    reservation = request_bytes(request)
    start = bytearray()  # the first SNIFF_WITHIN_BYTES: what tells the cap
    received = 0
    limit = cap.limit_bytes(b"")
    deadline = asyncio.get_running_loop().time() + timeout_s
    stream = request.stream()
    while True:
        if limit is None:
            limit = cap.limit_bytes(bytes(start))
        if limit is not None and declared_bytes is not None and declared_bytes > limit:
            raise cap.refusal(bytes(start), f"the request declares {declared_bytes} bytes")
        bound = cap.most_bytes if limit is None else limit
        if received > bound:
            raise cap.refusal(bytes(start), f"the request has more than {bound} bytes (refused there)")
        try:
            async with asyncio.timeout_at(deadline):  # the wait for the client only, not the sink's work
                chunk = await anext(stream, None)
        except TimeoutError:
            raise BodyTimeout(
                f"the request body did not arrive within {timeout_s:g} s ({received} bytes by then)",
                details={"timeout_s": timeout_s},
            ) from None
        if chunk is None:
            return received
        received += len(chunk)
        if reservation is not None:
            reservation.reserve_to(received)
        if len(start) < SNIFF_WITHIN_BYTES:
            start += chunk[: SNIFF_WITHIN_BYTES - len(start)]
        await sink(chunk)


def load_json(body: bytes, what: str) -> Any:
    """``body`` parsed, or 422 naming ``what``: not JSON, not UTF-8, or nested past the parser's depth."""
    try:
        return json.loads(body or b"null")
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        reason = "it is nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise InvalidParameter(f"{what} cannot be parsed: {reason}") from None


async def read_upload(request: Request, settings: Settings) -> Upload:
    """The photo and the options of a request to a synchronous route, read whole under the photo cap (a video is
    refused: 415). ``POST /v1/jobs`` streams its upload instead (``serve_app.streamed_uploads``)."""
    content_type = media_type(request)
    caps = media_caps(settings.max_image_bytes, None)
    body = await read_body(request, cap=UploadCap(caps, content_type), timeout_s=settings.body_timeout_s)
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
    """The image and options of a JSON body already read (``read_upload``)."""
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
