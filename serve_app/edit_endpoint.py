"""The external editor: an OpenAI-compatible ``POST {base_url}/images/edits`` (vLLM-Omni serving Qwen-Image-Edit, a
hosted Images API) that the operator sets up (``PORTRAIT_EDIT_ENDPOINT_*``) and an edit's ``model=external`` picks.
It lives at the edge, not in ``deployments/edit``, because it does network I/O: the job awaits it as it awaits a
stage, then composes its answer as it composes a look (scope, strength, identity_keep, the identity judge).

The photo goes out as a PNG scaled down to ``max_side_px``; the answer (``data[0].b64_json``) is scaled back to the
photo's size (a different shape is refused: stretching would move the face).

A call follows the outbound rules of callbacks (``serve_app.outbound``): the host is resolved once and that address is
the one connected to; every address must be public, on port 80 or 443, unless the host or a network holding it is in
``PORTRAIT_EDIT_ENDPOINT_HOSTS`` (then any port); no redirects, no proxy from the environment; the answer is read up to
``max_response_bytes``; one deadline, ``timeout_s``, covers all of it. The host is the operator's choice, not a
caller's, so the errors may say why. Each failure is translated here, once:

    past timeout_s                                         EditorTimeout     504 editor_timeout
    a 4xx whose error code is a content-policy refusal     EditorRefused     422 editor_refused
    an address the rules refuse, unreachable, any other
    status (a redirect too), not the images JSON, no
    data[0].b64_json, not base64, not an image, another
    shape, over max_response_bytes                         EditorFailed      502 editor_failed
    none configured, its API key unreadable                ModelUnavailable  503 model_unavailable

The API key (``PORTRAIT_EDIT_ENDPOINT_API_KEY``, or the file ``PORTRAIT_EDIT_ENDPOINT_API_KEY_FILE``) is read at each
call, so a rotated secret is picked up; it is sent as a bearer token and never logged. Answers name the endpoint's host
and model, never the key.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import functools
import ipaddress
import json
import logging
import socket
import ssl
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import cv2
import httpx
import numpy as np
from pydantic import BaseModel, Field, SecretStr, ValidationError

from deployments.common.engine import EngineInfo
from deployments.common.errors import (
    EditorFailed,
    EditorRefused,
    EditorTimeout,
    InternalError,
    InvalidParameter,
    ModelUnavailable,
    PortraitError,
)
from deployments.common.image import decode_image, encode_image
from deployments.edit.editor import EditedPhoto, PhotoToEdit
from deployments.edit.params import EXTERNAL
from serve_app.outbound import IpNetwork, reachable
from serve_app.secret_sources import read_secret
from serve_app.settings import Settings

logger = logging.getLogger(__name__)

API_KEY_ENV = "PORTRAIT_EDIT_ENDPOINT_API_KEY"
DEFAULT_PORTS = {"http": 80, "https": 443}
# The error codes OpenAI-compatible APIs give a prompt their safety system refused (OpenAI's DALL-E and gpt-image,
# Azure's content filter): the caller's words, a 422; every other 4xx is the endpoint's setup, a 502.
REFUSAL_CODES = frozenset({"content_policy_violation", "moderation_blocked", "content_filter"})
MAX_SHAPE_CHANGE = 0.05  # the answer's aspect ratio may differ from the photo's by this fraction (sizes rounded to 16)
ANSWER_PIXELS_PER_SENT = 16  # an answer may have this many times the pixels of the largest photo sent, no more

InWorker = Callable[..., Awaitable[Any]]


@dataclass(frozen=True)
class EditEndpoint:
    """Where the external editor is and how it is called (the settings ``PORTRAIT_EDIT_ENDPOINT_*``, whose defaults
    are the only ones)."""

    base_url: str
    model: str
    timeout_s: float
    max_response_bytes: int
    max_side_px: int
    size: Literal["photo", "auto"] | None = None
    hosts: tuple[str, ...] = ()
    api_key_file: Path | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> EditEndpoint | None:
        if settings.edit_endpoint_url is None or settings.edit_endpoint_model is None:
            return None
        return cls(
            base_url=settings.edit_endpoint_url,
            model=settings.edit_endpoint_model,
            timeout_s=settings.edit_endpoint_timeout_s,
            max_response_bytes=settings.edit_endpoint_max_response_bytes,
            max_side_px=settings.edit_endpoint_max_side_px,
            size=settings.edit_endpoint_size,
            hosts=settings.edit_endpoint_hosts,
            api_key_file=settings.edit_endpoint_api_key_file,
        )

    @property
    def scheme(self) -> str:
        return urllib.parse.urlsplit(self.base_url).scheme

    @property
    def hostname(self) -> str:
        return urllib.parse.urlsplit(self.base_url).hostname or ""

    @property
    def port(self) -> int:
        return urllib.parse.urlsplit(self.base_url).port or DEFAULT_PORTS[self.scheme]

    @property
    def host(self) -> str:
        """``host:port`` as answers name it (never the URL's user info)."""
        return f"{self._bracketed}:{self.port}"

    @property
    def host_header(self) -> str:
        return self._bracketed if self.port == DEFAULT_PORTS[self.scheme] else self.host

    @property
    def _bracketed(self) -> str:
        return f"[{self.hostname}]" if ":" in self.hostname else self.hostname

    @property
    def networks(self) -> tuple[IpNetwork, ...]:
        """The CIDRs and addresses of ``hosts`` (the other entries are host names)."""
        networks = []
        for entry in self.hosts:
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                continue  # a host name
        return tuple(networks)

    @property
    def engine(self) -> EngineInfo:
        """What answers name: the engine ``external``, the endpoint's model as its weights, its host as their label."""
        return EngineInfo(
            engine=EXTERNAL,
            neural=True,
            weights=self.model,
            weights_label=f"OpenAI-compatible images endpoint at {self.host}",
        )


def require_endpoint(endpoint: EditEndpoint | None) -> EditEndpoint:
    """The configured endpoint, or the 503 that names the settings to set."""
    if endpoint is None:
        raise ModelUnavailable(
            "model external needs an OpenAI-compatible images endpoint, and none is configured here: set "
            "PORTRAIT_EDIT_ENDPOINT_URL and PORTRAIT_EDIT_ENDPOINT_MODEL",
            details={"settings": ["PORTRAIT_EDIT_ENDPOINT_URL", "PORTRAIT_EDIT_ENDPOINT_MODEL"]},
        )
    return endpoint


class EndpointEditor:
    """An ``Editor`` that is awaited: ``edit`` sends the photo and the prompt and gives back the edited photo at the
    photo's size. ``in_worker`` runs the CPU steps (the PNG out, the JSON and image in): the job's ``run_in_worker``,
    so none of them starts past the job's deadline."""

    def __init__(self, endpoint: EditEndpoint, in_worker: InWorker) -> None:
        self.endpoint = endpoint
        self._in_worker = in_worker

    async def edit(self, item: PhotoToEdit) -> EditedPhoto:
        if item.prompt is None:
            raise InternalError("model external without a prompt: EditParams refuses it, so a bug here")
        png, sent_wh = await self._in_worker(photo_to_send, item.rgb, self.endpoint.max_side_px)
        answer = await post_edit(self.endpoint, png, sent_wh, item.prompt)
        rgb = await self._in_worker(photo_from_answer, answer, item.rgb.shape[:2], self.endpoint)
        return EditedPhoto(rgb, self.endpoint.engine)


def photo_to_send(rgb: np.ndarray, max_side_px: int) -> tuple[bytes, tuple[int, int]]:
    """``rgb`` (HxWx3 uint8 RGB) as a PNG no longer than ``max_side_px`` on either side, and its (width, height)."""
    height, width = rgb.shape[:2]
    scale = max_side_px / max(height, width)
    if scale < 1.0:
        size = (max(1, round(width * scale)), max(1, round(height * scale)))
        rgb = cv2.resize(rgb, size, interpolation=cv2.INTER_AREA)
    return encode_image(rgb, "png"), (rgb.shape[1], rgb.shape[0])


class _ImageIn(BaseModel):
    b64_json: str


class ImagesAnswerIn(BaseModel):
    """The part of an images answer that is read (``data[0].b64_json``); the rest (``created``, ``usage``...) is not."""

    data: list[_ImageIn] = Field(min_length=1)


def photo_from_answer(body: bytes, photo_hw: tuple[int, int], endpoint: EditEndpoint) -> np.ndarray:
    """The edited photo in an images answer, at ``photo_hw`` (height, width): HxWx3 uint8 RGB."""
    where = f"the edit endpoint at {endpoint.host}"
    try:
        encoded = ImagesAnswerIn.model_validate_json(body).data[0].b64_json
    except ValidationError:
        raise EditorFailed(f"{where} answered something else than images JSON with data[0].b64_json") from None
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise EditorFailed(f"{where} answered data[0].b64_json that is not base64") from None
    try:
        rgb = decode_image(
            data,
            max_bytes=endpoint.max_response_bytes,
            max_pixels=ANSWER_PIXELS_PER_SENT * endpoint.max_side_px**2,
        ).rgb
    except PortraitError as exc:  # the decoder's 4xx: the endpoint's image, not the caller's
        raise EditorFailed(f"{where} answered an image that cannot be read: {exc.message}") from None
    height, width = photo_hw
    got_height, got_width = rgb.shape[:2]
    if abs((got_width / got_height) / (width / height) - 1.0) > MAX_SHAPE_CHANGE:
        raise EditorFailed(
            f"{where} answered a {got_width}x{got_height} image for a {width}x{height} photo, another shape: "
            "leave PORTRAIT_EDIT_ENDPOINT_SIZE unset or set it to photo",
            details={"answer_wh": [got_width, got_height], "photo_wh": [width, height]},
        )
    if (got_height, got_width) != (height, width):
        shrink = got_width > width
        rgb = cv2.resize(rgb, (width, height), interpolation=cv2.INTER_AREA if shrink else cv2.INTER_CUBIC)
    return rgb


async def post_edit(endpoint: EditEndpoint, png: bytes, sent_wh: tuple[int, int], prompt: str) -> bytes:
    """The body of the endpoint's 200 answer to one edit of ``png`` by ``prompt``, within ``endpoint.timeout_s``."""
    fields = {"model": endpoint.model, "prompt": prompt, "n": "1", "response_format": "b64_json"}
    if endpoint.size is not None:
        fields["size"] = f"{sent_wh[0]}x{sent_wh[1]}" if endpoint.size == "photo" else endpoint.size
    headers = {"Accept": "application/json", "Accept-Encoding": "identity"}
    api_key = _api_key(endpoint)
    if api_key is not None:
        headers["Authorization"] = f"Bearer {api_key.get_secret_value()}"
    try:
        async with asyncio.timeout(endpoint.timeout_s):
            address = await _checked_address(endpoint)
            status, body = await _post(endpoint, address, fields, png, headers)
    except (TimeoutError, httpx.TimeoutException):  # before OSError: TimeoutError is one
        raise EditorTimeout(
            f"the edit endpoint at {endpoint.host} did not answer within {endpoint.timeout_s:g} s",
            details={"timeout_s": endpoint.timeout_s},
        ) from None
    except (httpx.HTTPError, OSError) as exc:
        logger.warning("edit endpoint %s unreachable: %s: %s", endpoint.host, type(exc).__name__, exc)
        raise EditorFailed(f"the edit endpoint at {endpoint.host} cannot be reached ({type(exc).__name__})") from None
    if status == 200:
        return body
    message = _error_message(body)
    if 400 <= status < 500 and _error_code(body) in REFUSAL_CODES:
        raise EditorRefused(
            f"the edit endpoint refused the prompt: {message}", details={"endpoint": endpoint.host, "status": status}
        )
    logger.warning("edit endpoint %s answered HTTP %d: %s", endpoint.host, status, message)
    raise EditorFailed(f"the edit endpoint at {endpoint.host} answered HTTP {status}", details={"status": status})


def _api_key(endpoint: EditEndpoint) -> SecretStr | None:
    try:
        return read_secret("the edit endpoint's API key", env=API_KEY_ENV, file=endpoint.api_key_file)
    except InvalidParameter as exc:  # the operator's setup: logged for them, a 503 for the caller
        logger.error("%s", exc.message)
        raise ModelUnavailable("the edit endpoint's API key cannot be read: the service's log says why") from None


async def _checked_address(endpoint: EditEndpoint) -> str:
    """The one address the call connects to: every address of the host public on port 80 or 443, or the host (or
    each of its addresses' networks) listed in ``hosts``."""
    host, port = endpoint.hostname, endpoint.port
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise EditorFailed(f"the edit endpoint's host {host} does not resolve") from None
    addresses = [ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos]
    networks = endpoint.networks
    listed = host in endpoint.hosts or all(any(a in network for network in networks) for a in addresses)
    public = port in DEFAULT_PORTS.values() and all(reachable(address, ()) for address in addresses)
    if not addresses or not (listed or public):
        raise EditorFailed(
            f"the edit endpoint {endpoint.host} is not a public address on port 80 or 443, and "
            "PORTRAIT_EDIT_ENDPOINT_HOSTS does not list it"
        )
    return str(addresses[0])


async def _post(
    endpoint: EditEndpoint, address: str, fields: dict[str, str], png: bytes, headers: dict[str, str]
) -> tuple[int, bytes]:
    """POST to the checked ``address`` (not a second lookup of the name), the URL's host in Host and TLS; the answer's
    status and its body, read up to ``max_response_bytes``."""
    parsed = urllib.parse.urlsplit(endpoint.base_url)
    literal = f"[{address}]" if ":" in address else address
    url = f"{parsed.scheme}://{literal}:{endpoint.port}{parsed.path}/images/edits"
    extensions = {"sni_hostname": endpoint.hostname} if endpoint.scheme == "https" else {}
    async with httpx.AsyncClient(
        timeout=endpoint.timeout_s, follow_redirects=False, verify=_tls_context(), trust_env=False
    ) as client:
        async with client.stream(
            "POST",
            url,
            data=fields,
            files={"image": ("photo.png", png, "image/png")},
            headers={**headers, "Host": endpoint.host_header},
            extensions=extensions,
        ) as answer:
            return answer.status_code, await _read_capped(answer, endpoint)


async def _read_capped(answer: httpx.Response, endpoint: EditEndpoint) -> bytes:
    cap = endpoint.max_response_bytes
    too_long = EditorFailed(
        f"the edit endpoint at {endpoint.host} answered more than {cap} bytes "
        "(PORTRAIT_EDIT_ENDPOINT_MAX_RESPONSE_BYTES)",
        details={"max_response_bytes": cap},
    )
    declared = answer.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > cap:
        raise too_long
    body = bytearray()
    async for chunk in answer.aiter_bytes():
        body += chunk
        if len(body) > cap:
            raise too_long
    return bytes(body)


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """The public roots (certifi, or ``SSL_CERT_FILE``/``SSL_CERT_DIR``), built once."""
    return httpx.create_ssl_context()


def _error(body: bytes) -> dict[str, Any]:
    """The ``error`` object of an OpenAI-style error answer, or empty."""
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError):
        return {}
    error = payload.get("error") if isinstance(payload, dict) else None
    return error if isinstance(error, dict) else {}


def _error_code(body: bytes) -> str | None:
    error = _error(body)
    code = error.get("code") or error.get("type")
    return code if isinstance(code, str) else None


def _error_message(body: bytes) -> str:
    message = _error(body).get("message")
    return str(message)[:200] if message else body[:200].decode("utf-8", "replace")
