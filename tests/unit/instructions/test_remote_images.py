"""A chat request's image URL cannot turn the service inward: non-global addresses (however spelled) refused after one
resolution, ports 80/443 unless listed, one deadline for the whole fetch, one text for every failure."""

from __future__ import annotations

import asyncio
import ipaddress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from fastapi.testclient import TestClient

from deployments.common.errors import ImageTooLarge, InvalidParameter, VideoNeedsJob, VideoTooLarge
from serve_app.byte_caps import media_caps
from serve_app.instructions import InstructionsConfig
from serve_app.openai_wire import RemoteImageRefused
from serve_app.remote_images import fetch_image, reachable
from tests.unit.instructions.instruction_fixtures import MP4_START

MAX_BYTES = 1_000_000
UNFETCHABLE = "the image at image_url cannot be fetched: send the photo as a data URL (data:image/jpeg;base64,...)"


def _config(server, **options) -> InstructionsConfig:
    """Any host, the test server's port listed; loopback trusted only when ``trusted``."""
    trusted = options.pop("trusted", True)
    networks = ("127.0.0.0/8",) if trusted else ()
    return InstructionsConfig(
        image_url_hosts=("*",), image_url_ports=(server.server_address[1],), image_url_networks=networks, **options
    )


def _fetch(url: str, config: InstructionsConfig) -> bytes:
    return asyncio.run(fetch_image(url, config, media_caps(MAX_BYTES, None)))


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",  # cloud metadata
        "100.64.0.1",
        "0.0.0.0",
        "224.0.0.1",
        "::1",
        "::",
        "fe80::1",
        "fc00::1",
        "ff02::1",
        "::ffff:127.0.0.1",
        "::ffff:169.254.169.254",
        "2002:7f00:1::1",  # 6to4 of 127.0.0.1
        "64:ff9b::a01:203",  # NAT64 of 10.1.2.3
    ],
)
def test_non_global_addresses_are_refused(address):
    assert not reachable(ipaddress.ip_address(address), ())


@pytest.mark.parametrize(
    "address",
    [
        # The five #32 finding 10 named: Python 3.11's is_global is true for each.
        "::127.0.0.1",  # IPv4-compatible (deprecated ::/96) of loopback
        "::10.0.0.1",  # IPv4-compatible of a private address
        "64:ff9b:1::a00:1",  # RFC 8215 local-use NAT64 (64:ff9b:1::/48) of 10.0.0.1
        "fec0::1",  # site-local (fec0::/10)
        "fec0:1::1",
        # Their kin: nothing outside 2000::/3 is global unicast.
        "::8.8.8.8",  # IPv4-compatible of a public address: not routed either
        "::169.254.169.254",
        "::ffff:0:127.0.0.1",  # IPv4-translated (::ffff:0:0:0/96)
        "64:ff9b:1:7f00:1::",  # local-use NAT64 with the IPv4 at another offset
        "64:ff9b:1::808:808",
        "feff::1",  # the top of fec0::/10
        "5f00::1",  # SRv6 SIDs (RFC 9602)
        "::2",
        "3fff::1",  # documentation (RFC 9637), inside 2000::/3
    ],
)
def test_ipv6_forms_python_calls_global_are_refused(address):
    assert not reachable(ipaddress.ip_address(address), ())


def test_a_trusted_network_reaches_even_site_local_ipv6():
    config = InstructionsConfig(image_url_networks=("fec0::/10",))
    assert reachable(ipaddress.ip_address("fec0::1"), config.image_url_networks)


@pytest.mark.parametrize(
    "address",
    ["8.8.8.8", "2606:4700::1111", "2a00:1450:4001:80e::200e", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"],
)
def test_global_addresses_are_reachable(address):
    assert reachable(ipaddress.ip_address(address), ())


def test_a_trusted_network_is_reachable():
    config = InstructionsConfig(image_url_networks=("10.0.0.0/8",))
    assert reachable(ipaddress.ip_address("10.1.2.3"), config.image_url_networks)
    assert not reachable(ipaddress.ip_address("192.168.1.1"), config.image_url_networks)


@pytest.mark.parametrize("host", ["127.0.0.1", "2130706433", "0x7f000001", "127.1", "[::ffff:127.0.0.1]", "localhost"])
def test_loopback_however_spelled_is_refused_before_any_request(photo_server, host):
    port = photo_server.server_address[1]
    with pytest.raises(InvalidParameter) as refused:
        _fetch(f"http://{host}:{port}/me.jpg", _config(photo_server, trusted=False))
    assert refused.value.message == UNFETCHABLE
    assert photo_server.served == []


def test_a_trusted_network_is_fetched(photo_server, photo_jpeg):
    assert _fetch(f"http://127.0.0.1:{photo_server.server_address[1]}/me.jpg", _config(photo_server)) == photo_jpeg


def test_a_remote_file_over_its_cap_is_refused_as_what_it_is(photo_server, photo_jpeg):
    """A video where none is taken: 415 video_needs_job; where videos are taken, its own cap; a photo, the photo's."""
    base, config = f"http://127.0.0.1:{photo_server.server_address[1]}", _config(photo_server)
    clip_bytes = len(MP4_START) + 5000
    with pytest.raises(VideoNeedsJob):
        asyncio.run(fetch_image(f"{base}/clip.mp4", config, media_caps(1000, None)))
    with pytest.raises(VideoTooLarge) as video:
        asyncio.run(fetch_image(f"{base}/clip.mp4", config, media_caps(1000, 2000)))
    assert video.value.message == (
        f"the file at image_url has {clip_bytes} bytes: over the limit for a video, 2000 bytes "
        "(PORTRAIT_MAX_VIDEO_BYTES raises it)"
    )
    with pytest.raises(ImageTooLarge) as photo:
        asyncio.run(fetch_image(f"{base}/me.jpg", config, media_caps(1000, 10**6)))
    assert photo.value.details == {"limit": "max_image_bytes", "max_bytes": 1000, "setting": "PORTRAIT_MAX_IMAGE_BYTES"}
    assert len(photo_jpeg) > 1000


def test_ports_other_than_80_and_443_are_refused_unless_listed():
    config = InstructionsConfig(image_url_hosts=("*",))
    with pytest.raises(RemoteImageRefused) as refused:
        _fetch("http://photos.example:8080/me.jpg", config)
    assert (refused.value.message, refused.value.details["allowed_ports"]) == (
        "images are not fetched from port 8080",
        [80, 443],
    )


def test_a_server_that_drips_is_cut_at_one_deadline(photo_server):
    """60 bytes over 3 s, each within any per-read timeout: only a deadline for the whole fetch stops it."""
    config = _config(photo_server, image_fetch_timeout_s=0.5)
    with pytest.raises(InvalidParameter) as cut:
        _fetch(f"http://127.0.0.1:{photo_server.server_address[1]}/drip", config)
    assert cut.value.message == UNFETCHABLE


def test_every_failure_answers_the_same_text(photo_server):
    port = photo_server.server_address[1]
    closed = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    closed_port = closed.server_address[1]
    closed.server_close()  # nothing listens there now
    config = _config(photo_server, trusted=True).model_copy(update={"image_url_ports": (port, closed_port)})
    urls = [
        f"http://127.0.0.1:{port}/away",  # a redirect
        f"http://127.0.0.1:{port}/missing",  # a 404
        f"http://127.0.0.1:{port}/chunked",  # chunked, in answer to HTTP/1.0
        f"http://127.0.0.1:{closed_port}/me.jpg",  # connection refused
        f"http://10.255.255.1:{port}/me.jpg",  # a private address not trusted
    ]
    messages = set()
    for url in urls:
        with pytest.raises(InvalidParameter) as failed:
            _fetch(url, config)
        messages.add(failed.value.message)
    assert messages == {UNFETCHABLE}


def test_an_unparseable_port_is_the_callers_422(api):
    api.state.instructions = InstructionsConfig(image_url_hosts=("*",))
    message = {"role": "user", "content": [{"type": "text", "text": "卡通"}, {"type": "image_url", "image_url": "x"}]}
    message["content"][1]["image_url"] = "http://localhost:abc/me.jpg"
    with TestClient(api, raise_server_exceptions=False) as client:
        answer = client.post("/v1/chat/completions", json={"model": "portrait", "messages": [message]})
    assert answer.status_code == 422
    assert answer.json()["error"] == {
        "message": "image_url is not a valid URL",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "invalid_parameter",
    }
