"""What a chat completion request holds: its body (streamed under a cap), the last user message's text,
and the photo its ``image_url`` part carries: a base64 data URL, or an http(s) URL on an allowed host only, fetched
without redirects so a reply cannot send us elsewhere (to an internal address).
"""

import asyncio
import base64
import binascii
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from deployments.common.errors import ImageTooLarge, InvalidParameter
from serve_app.instructions import InstructionsConfig
from serve_app.openai_wire import ChatMessage, ChatRequest, RemoteImageRefused
from serve_app.settings import Settings
from serve_app.uploads import BASE64_GROWTH, body_limit_bytes, read_body

IN_MESSAGES = {"field": "messages"}  # where a chat request's problem lies (OpenAI's error "param")


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


async def image_from_url(url: str, config: InstructionsConfig, max_bytes: int) -> bytes:
    if url.startswith("data:"):
        header, _, encoded = url.partition(",")
        if not header.endswith(";base64"):
            raise InvalidParameter("an image data URL must be base64 (data:image/jpeg;base64,...)", details=IN_MESSAGES)
        if len(encoded) > max_bytes * BASE64_GROWTH + 4:
            raise ImageTooLarge(f"the image data URL holds more than {max_bytes} bytes")
        try:
            return base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise InvalidParameter(f"the image data URL is not valid base64: {exc}", details=IN_MESSAGES) from None
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme not in ("http", "https"):
        raise InvalidParameter("image_url must be a data: URL (or an http(s) URL where allowed)", details=IN_MESSAGES)
    if "*" not in config.image_url_hosts and parsed.hostname not in config.image_url_hosts:
        raise RemoteImageRefused(
            f"images are not fetched from {parsed.hostname}: send the photo as a data URL "
            "(data:image/jpeg;base64,...) in the image_url part",
            details={**IN_MESSAGES, "allowed_hosts": list(config.image_url_hosts)},
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
        raise InvalidParameter(f"the image at {url} cannot be fetched: {reason}", details=IN_MESSAGES) from None
    if len(data) > max_bytes:
        raise ImageTooLarge(f"the image at {url} has more than {max_bytes} bytes")
    return data


async def read_chat_request(request: Request, settings: Settings) -> ChatRequest:
    """The body, streamed under the JSON cap (a photo travels base64 inside it) and the body deadline."""
    limit_bytes = body_limit_bytes("application/json", settings.max_image_bytes)
    body = await read_body(request, limit_bytes=limit_bytes, timeout_s=settings.body_timeout_s)
    try:
        return ChatRequest.model_validate_json(body)
    except ValidationError as exc:
        raise RequestValidationError(exc.errors(include_url=False, include_context=False)) from None
