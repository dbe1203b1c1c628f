"""Fetching a chat request's photo from an http(s) URL, for the hosts ``instructions.image_url_hosts`` allows.

A URL is someone else's choice of where the service connects, so the fetch is built not to be turned inward:

- the host name is resolved once, and the connection goes to that address (no second lookup a DNS answer could
  change in between); every address it resolves to must be global: loopback, private, link-local, shared, multicast
  and reserved addresses are refused, also inside an IPv4-mapped, 6to4 or NAT64 IPv6 address and when spelled as a
  decimal or hex number (the resolver reads those as addresses); an IPv6 address outside ``2000::/3`` (the only
  global unicast space) is refused whatever Python's ``is_global`` says (IPv4-compatible ``::a.b.c.d``, local-use
  NAT64 ``64:ff9b:1::/48``, site-local ``fec0::/10``); ``image_url_networks`` lists networks an operator trusts (an
  in-house image store);
- ports 80 and 443 only, unless ``image_url_ports`` lists others; no redirects (a redirect answers as a failure);
- one deadline for all of it (resolve, connect, TLS, headers and body), so a server that drips its answer holds the
  request no longer than ``image_fetch_timeout_s``; the body is read up to the image limit, then refused;
- every failure answers with one text, so the answers tell nothing about what sits behind an address (the reason is
  logged). A URL that does not parse is the caller's 422.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import ssl
import urllib.parse
from dataclasses import dataclass

from deployments.common.errors import InvalidParameter
from serve_app.byte_caps import SNIFF_BYTES, MediaCaps
from serve_app.instructions import InstructionsConfig
from serve_app.openai_wire import IN_MESSAGES, RemoteImageRefused
from serve_app.outbound import IpAddress, reachable

logger = logging.getLogger(__name__)

_DEFAULT_PORTS = {"http": 80, "https": 443}
_SAFE = "/?&=%:@!$'()*+,;~"  # characters a request target keeps as they are; the rest (non-ASCII) is %-encoded


class _Unfetchable(Exception):
    """Why one fetch failed; logged, never shown (the caller gets one text for every reason)."""


# Every way a fetch fails: refused here, unresolvable, unreachable, TLS, past the deadline, a broken answer.
_FAILURES = (_Unfetchable, OSError, TimeoutError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError)


@dataclass(frozen=True)
class RemoteImage:
    """A parsed image URL the fetch may try: its host allowed, its port listed."""

    scheme: str
    host: str
    port: int
    target: str  # path and query, as sent in the request line


def parse_image_url(url: str, config: InstructionsConfig) -> RemoteImage:
    """The URL's parts, or the caller's error: not http(s), unparseable, a host or a port not allowed."""
    try:
        parsed = urllib.parse.urlsplit(url)
        port = parsed.port
    except ValueError:
        raise InvalidParameter("image_url is not a valid URL", details=IN_MESSAGES) from None
    if parsed.scheme not in _DEFAULT_PORTS or not parsed.hostname:
        raise InvalidParameter("image_url must be a data: URL (or an http(s) URL where allowed)", details=IN_MESSAGES)
    host = parsed.hostname
    if "*" not in config.image_url_hosts and host not in config.image_url_hosts:
        raise RemoteImageRefused(
            f"images are not fetched from {host}: send the photo as a data URL "
            "(data:image/jpeg;base64,...) in the image_url part",
            details={**IN_MESSAGES, "allowed_hosts": list(config.image_url_hosts)},
        )
    port = port or _DEFAULT_PORTS[parsed.scheme]
    allowed_ports = {80, 443, *config.image_url_ports}
    if port not in allowed_ports:
        raise RemoteImageRefused(
            f"images are not fetched from port {port}",
            details={**IN_MESSAGES, "allowed_ports": sorted(allowed_ports)},
        )
    target = urllib.parse.quote(urllib.parse.urlunsplit(("", "", parsed.path or "/", parsed.query, "")), safe=_SAFE)
    return RemoteImage(parsed.scheme, host, port, target)


async def fetch_image(url: str, config: InstructionsConfig, caps: MediaCaps) -> bytes:
    """The image at ``url`` (see the module docstring for what is refused), within one deadline."""
    remote = parse_image_url(url, config)
    try:
        async with asyncio.timeout(config.image_fetch_timeout_s):
            return await _fetch(remote, config, caps)
    except _FAILURES as exc:
        logger.info("image_url %s:%d not fetched: %s", remote.host, remote.port, exc or type(exc).__name__)
        raise InvalidParameter(
            "the image at image_url cannot be fetched: send the photo as a data URL (data:image/jpeg;base64,...)",
            details=IN_MESSAGES,
        ) from None


async def _fetch(remote: RemoteImage, config: InstructionsConfig, caps: MediaCaps) -> bytes:
    address = await _resolve_once(remote, config)
    tls = ssl.create_default_context() if remote.scheme == "https" else None
    reader, writer = await asyncio.open_connection(
        str(address), remote.port, ssl=tls, server_hostname=remote.host if tls else None
    )
    try:
        request = f"GET {remote.target} HTTP/1.0\r\nHost: {_host_header(remote)}\r\nAccept: image/*\r\n\r\n"
        writer.write(request.encode("ascii", "strict"))
        await writer.drain()
        declared = await _read_head(reader)
        data = bytearray()
        while len(data) < SNIFF_BYTES and (chunk := await reader.read(SNIFF_BYTES - len(data))):
            data += chunk  # its first bytes say what it is, and so its cap
        cap = caps.cap_for(bytes(data))
        if declared is not None and declared > cap.max_bytes:
            raise cap.refusal(f"the file at image_url has {declared} bytes")
        while len(data) <= cap.max_bytes and (chunk := await reader.read(cap.max_bytes + 1 - len(data))):
            data += chunk
        if len(data) > cap.max_bytes:
            raise cap.refusal(f"the file at image_url has more than {cap.max_bytes} bytes")
        return bytes(data)
    finally:
        writer.close()


def _host_header(remote: RemoteImage) -> str:
    host = f"[{remote.host}]" if ":" in remote.host else remote.host
    return host if remote.port == _DEFAULT_PORTS[remote.scheme] else f"{host}:{remote.port}"


async def _resolve_once(remote: RemoteImage, config: InstructionsConfig) -> IpAddress:
    """The first address ``host`` resolves to, when every one it resolves to may be reached."""
    infos = await asyncio.get_running_loop().getaddrinfo(remote.host, remote.port, type=socket.SOCK_STREAM)
    addresses = [ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos]
    refused = [address for address in addresses if not reachable(address, config.image_url_networks)]
    if not addresses or refused:
        raise _Unfetchable(f"{remote.host} resolves to {refused or 'nothing'}, which is not a global address")
    return addresses[0]


async def _read_head(reader: asyncio.StreamReader) -> int | None:
    """Status line and headers (at most the reader's 64 KiB) of a 200 answer; its Content-Length when it sends one.
    Anything else (a redirect included) is a failure."""
    head = await reader.readuntil(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or parts[1] != "200":
        raise _Unfetchable(f"the answer is {status_line!r}")
    headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    if headers.get("transfer-encoding", "identity").lower() != "identity":  # not allowed in answer to HTTP/1.0
        raise _Unfetchable(f"the answer is {headers['transfer-encoding']}-encoded")
    declared = headers.get("content-length", "")
    return int(declared) if declared.isdigit() else None
