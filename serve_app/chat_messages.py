"""What a chat completion request holds: its body (streamed under a cap), the last user message's text,
and the photo its ``image_url`` part carries: a base64 data URL, or an http(s) URL on an allowed host only, fetched
so that it cannot be turned inward (:mod:`serve_app.remote_images`).
"""

import asyncio
import base64
import binascii
from collections.abc import Mapping

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from deployments.common.errors import InvalidParameter
from serve_app.byte_caps import MediaCaps, media_caps
from serve_app.instructions import InstructionsConfig
from serve_app.openai_wire import IN_MESSAGES, ChatMessage, ChatRequest
from serve_app.remote_images import fetch_image
from serve_app.settings import Settings
from serve_app.uploads import BASE64_GROWTH, UploadCap, base64_head, read_body


def text_and_image_url(messages: list[ChatMessage]) -> tuple[str, str | None]:
    """The last user message's text, and the newest image any user message holds."""
    users = [message for message in messages if message.role == "user"]
    if not users:
        raise InvalidParameter("the messages hold no user message", details=IN_MESSAGES)
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


async def image_from_url(url: str, config: InstructionsConfig, caps: MediaCaps) -> bytes:
    """The photo of a data URL, or of an http(s) URL the config allows (:mod:`serve_app.remote_images`), each under
    its kind's cap (``serve_app.byte_caps``)."""
    if not url.startswith("data:"):
        return await fetch_image(url, config, caps)
    header, _, encoded = url.partition(",")
    if not header.endswith(";base64"):
        raise InvalidParameter("an image data URL must be base64 (data:image/jpeg;base64,...)", details=IN_MESSAGES)
    cap = caps.cap_for(base64_head(encoded.encode("ascii", "replace")) or b"")
    if len(encoded) > cap.max_bytes * BASE64_GROWTH + 4:
        raise cap.refusal(f"the data URL holds about {len(encoded) * 3 // 4} bytes")
    try:
        return await asyncio.to_thread(base64.b64decode, encoded, validate=True)  # 0.5 s at the cap: off the loop
    except (binascii.Error, ValueError) as exc:
        raise InvalidParameter(f"the image data URL is not valid base64: {exc}", details=IN_MESSAGES) from None


async def read_chat_request(request: Request, settings: Settings) -> ChatRequest:
    """The body, streamed under the JSON cap (a photo travels base64 inside it) and the body deadline."""
    cap = UploadCap(media_caps(settings.max_image_bytes, None), "application/json")
    body = await read_body(request, cap=cap, timeout_s=settings.body_timeout_s)
    try:
        return await asyncio.to_thread(ChatRequest.model_validate_json, body)
    except ValidationError as exc:
        raise RequestValidationError(exc.errors(include_url=False, include_context=False)) from None
