"""Signed job callbacks: ``POST callback_url`` with the job's status JSON when it ends, retried with backoff.

    X-Portrait-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>
    X-Portrait-Key-Id: <the job's key>       (which secret to check with; the signed body says it too)

The secret is the key's own (``callback_secret``/``_env``/``_file``), else the app's (``PORTRAIT_CALLBACK_SECRET``,
``args.jobs.callback_secret_file``). The signed body names the key (``key_id``, with the job's ``id``) and the receiver
(``callback_url``): a receiver that checks both (``verify``) refuses a signature made for another key or another
receiver, even when the app's one secret signs for both. A callback goes only to a public
address (resolved once, and that address is the one connected to), on port 80 or 443, unless its host, its address
or a network holding it is listed in ``args.jobs.callback_hosts``. An https receiver's certificate is always verified,
for the URL's host name: against the public roots httpx trusts (certifi, or ``SSL_CERT_FILE``/``SSL_CERT_DIR``), plus
the CAs of ``args.jobs.callback_ca_file`` for receivers behind a private CA. Delivery is at least once: the receiver
dedupes by job id.

What a receiver can make the runner spend is bounded: one attempt (resolving, connecting, TLS, sending, the answer's
status line and headers) ends within ``callback_timeout_s`` whatever the receiver does, and the answer's body is never
read (only the status counts).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import ipaddress
import json
import socket
import ssl
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import httpx

from deployments.common.errors import InvalidParameter
from serve_app.remote_images import reachable
from serve_app.runner.jobs_config import JobsConfig

SIGNATURE_HEADER = "X-Portrait-Signature"
KEY_ID_HEADER = "X-Portrait-Key-Id"
DEFAULT_PORTS = {"http": 80, "https": 443}
MAX_BACKOFF_S = 300.0


class CallbackRefused(InvalidParameter):
    """A ``callback_url`` the service will not call (scheme, port, or an address that is not public)."""

    code = "callback_refused"


def sign(secret: str, body: bytes, timestamp_s: int) -> str:
    digest = hmac.new(secret.encode("utf-8"), f"{timestamp_s}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp_s},v1={digest}"


def verify(
    secret: str,
    header: str,
    body: bytes,
    *,
    now_s: float,
    tolerance_s: float = 300.0,
    url: str | None = None,
    key_id: str | None = None,
) -> bool:
    """What a receiver does (docs/buckets-and-jobs.md "Callbacks"): the signature matches and is recent, and the signed
    body names the receiver's own ``url`` and ``key_id`` (each checked when given)."""
    fields = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    if not fields.get("t", "").isdigit() or "v1" not in fields:
        return False
    expected = sign(secret, body, int(fields["t"])).split("v1=", 1)[1]
    if not (hmac.compare_digest(expected, fields["v1"]) and abs(now_s - int(fields["t"])) <= tolerance_s):
        return False
    if url is None and key_id is None:
        return True
    try:
        sent = json.loads(body)
    except ValueError:
        return False
    return isinstance(sent, dict) and all(
        sent.get(name) == wanted for name, wanted in (("callback_url", url), ("key_id", key_id)) if wanted is not None
    )


@dataclass(frozen=True)
class Target:
    """Where a callback connects: the URL's host, and the one address it resolved to (checked)."""

    url: str
    host: str
    address: str
    port: int


def resolve_target(url: str, config: JobsConfig) -> Target:
    """Check ``url`` against the remote-fetch address rules (``serve_app.remote_images.reachable``), with
    ``callback_hosts`` as the trusted hosts and networks, and resolve its host once; ``CallbackRefused`` says why."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in DEFAULT_PORTS or not parsed.hostname:
        raise CallbackRefused(f"callback_url must be an http(s) URL with a host, got {url!r}")
    try:
        port = parsed.port or DEFAULT_PORTS[parsed.scheme]
    except ValueError:
        raise CallbackRefused(f"callback_url has an invalid port: {url!r}") from None
    host = parsed.hostname.lower()
    listed = host in config.callback_hosts
    if port not in DEFAULT_PORTS.values() and not listed:
        raise CallbackRefused(f"callbacks go to ports 80 and 443 only (unless the host is listed), not {port}")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise CallbackRefused(f"the callback host {host!r} does not resolve") from None
    addresses = [ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos]
    if not listed and not all(reachable(address, config.callback_networks) for address in addresses):
        raise CallbackRefused(f"the callback host {host!r} is not a public address (args.jobs.callback_hosts)")
    return Target(url=url, host=host, address=str(addresses[0]), port=port)


Poster = Callable[[Target, bytes, dict[str, str], float], Awaitable[int]]


def tls_context(config: JobsConfig) -> ssl.SSLContext:
    """What https callbacks trust: the public roots, plus ``callback_ca_file``'s CAs (``InvalidParameter`` when that
    file cannot be read as PEM certificates: a start-up error, not a callback failing for an hour)."""
    context = httpx.create_ssl_context()
    if config.callback_ca_file is not None:
        try:
            context.load_verify_locations(cafile=config.callback_ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise InvalidParameter(
                f"args.jobs.callback_ca_file {config.callback_ca_file!r} is not a readable PEM file of CA "
                f"certificates: {exc}",
                details={"callback_ca_file": config.callback_ca_file},
            ) from exc
    return context


def callback_poster(config: JobsConfig) -> Poster:
    """The ``Poster`` that sends: ``post_to`` with the configuration's TLS trust, built once."""
    tls = tls_context(config)

    async def post(target: Target, body: bytes, headers: dict[str, str], timeout_s: float) -> int:
        return await post_to(target, body, headers, timeout_s, tls=tls)

    return post


async def post_to(
    target: Target, body: bytes, headers: dict[str, str], timeout_s: float, *, tls: ssl.SSLContext
) -> int:
    """POST to the checked address (not a second lookup of the name), with the URL's host for Host and TLS (SNI and
    the certificate's name). The answer is streamed and only its status line and headers are read (httpcore caps them
    at 100 KiB, and reads the socket 64 KiB at a time): its body never is, whatever its length."""
    parsed = urllib.parse.urlsplit(target.url)
    literal = f"[{target.address}]" if ":" in target.address else target.address
    pinned = parsed._replace(netloc=f"{literal}:{target.port}").geturl()
    async with httpx.AsyncClient(timeout=timeout_s, follow_redirects=False, verify=tls) as client:
        async with client.stream(
            "POST",
            pinned,
            content=body,
            headers={**headers, "Host": parsed.netloc.rsplit("@", 1)[-1], "Content-Type": "application/json"},
            extensions={"sni_hostname": target.host},
        ) as answer:
            return answer.status_code  # the body is left unread: closing the stream drops the connection


async def attempt(
    url: str,
    body: bytes,
    secret: str,
    *,
    config: JobsConfig,
    timeout_s: float,
    post: Poster,
    headers: dict[str, str] | None = None,
    clock: Callable[[], float] = time.time,
) -> str | None:
    """One signed POST, all of it (resolving the host, connecting, TLS, sending, the answer's status) within
    ``timeout_s``: ``None`` when the receiver answered 2xx, else what went wrong."""
    signed = {**(headers or {}), SIGNATURE_HEADER: sign(secret, body, int(clock()))}
    try:
        async with asyncio.timeout(timeout_s):
            target = await asyncio.to_thread(resolve_target, url, config)
            status = await post(target, body, signed, timeout_s)
    except TimeoutError:  # before OSError: it is one
        return f"TimeoutError: the attempt took longer than callback_timeout_s ({timeout_s:g} s)"
    except (httpx.HTTPError, OSError, CallbackRefused) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None if 200 <= status < 300 else f"HTTP {status}"


@dataclass(frozen=True)
class Delivery:
    delivered: bool
    attempts: int
    last_error: str | None


async def deliver(
    url: str,
    body: bytes,
    secret: str,
    *,
    config: JobsConfig,
    deadline_s: float,
    timeout_s: float,
    post: Poster,
    headers: dict[str, str] | None = None,
    slots: asyncio.Semaphore | None = None,
    on_attempt: Callable[[int, str | None], Awaitable[None]] | None = None,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> Delivery:
    """POST (through ``post``: ``callback_poster`` sends) until a 2xx answer or ``deadline_s`` (unix time); backoff
    1 s doubling to 5 min. Each attempt is signed afresh (its own ``t``), holds one of ``slots`` (a bound on POSTs
    at once; not while waiting for the next) and is reported to ``on_attempt``."""
    tries, error = 0, None
    while True:
        tries += 1
        async with slots or contextlib.nullcontext():
            error = await attempt(
                url, body, secret, config=config, timeout_s=timeout_s, post=post, headers=headers, clock=clock
            )
        if on_attempt is not None:
            await on_attempt(tries, error)
        if error is None:
            return Delivery(True, tries, None)
        wait_s = min(MAX_BACKOFF_S, 2.0 ** (tries - 1))
        if clock() + wait_s > deadline_s:
            return Delivery(False, tries, error)
        await sleep(wait_s)
