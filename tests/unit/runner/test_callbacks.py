"""Callback signatures, the address rules, and delivery with backoff (a fake clock: no sleeping)."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
from unittest.mock import patch

import httpx
import pytest

from serve_app.runner.callbacks import CallbackRefused, deliver, resolve_target, sign, verify
from serve_app.runner.jobs_config import JobsConfig
from tests.unit.runner.documented_receiver import documented_verifier


def test_the_signature_is_hmac_sha256_of_t_dot_body_and_the_documented_receiver_checks_it():
    body = b'{"id":"x","key_id":"acme","callback_url":"https://acme.example/hook"}'
    header = sign("s3cret", body, 1_700_000_000)
    expected = hmac.new(b"s3cret", b"1700000000." + body, hashlib.sha256).hexdigest()
    assert header == f"t=1700000000,v1={expected}"
    with patch("time.time", return_value=1_700_000_010.0):  # the receiver of docs/buckets-and-jobs.md
        assert documented_verifier()(b"s3cret", header, body, "https://acme.example/hook", "acme")
        assert not documented_verifier()(b"s3cret", header, body, "https://acme.example/hook", "other")
        assert not documented_verifier()(b"s3cret", header, body, "https://other.example/hook", "acme")


def test_verify_checks_the_signed_key_and_receiver_when_given():
    body = b'{"id":"x","key_id":"acme","callback_url":"https://acme.example/hook"}'
    header = sign("s3cret", body, 1_000)
    assert verify("s3cret", header, body, now_s=1_010, url="https://acme.example/hook", key_id="acme")
    assert not verify("s3cret", header, body, now_s=1_010, url="https://acme.example/hook", key_id="bob")
    assert not verify("s3cret", header, body, now_s=1_010, url="https://bob.example/hook")
    assert not verify("s3cret", sign("s3cret", b"[]", 1_000), b"[]", now_s=1_010, key_id="acme")


def test_verify_refuses_another_body_another_secret_and_an_old_timestamp():
    header = sign("s3cret", b"body", 1_000)
    assert verify("s3cret", header, b"body", now_s=1_010)
    assert not verify("s3cret", header, b"bodY", now_s=1_010)
    assert not verify("other", header, b"body", now_s=1_010)
    assert not verify("s3cret", header, b"body", now_s=1_000 + 301)
    assert not verify("s3cret", "garbage", b"body", now_s=1_000)


@pytest.mark.parametrize(
    ("url", "allowed", "problem"),
    [
        ("ftp://example.com/x", (), r"must be an http\(s\) URL"),
        ("http://127.0.0.1/hook", (), "is not a public address"),
        ("http://10.0.0.5/hook", (), "is not a public address"),
        ("http://[::ffff:127.0.0.1]/hook", (), "is not a public address"),
        ("http://169.254.169.254/latest", (), "is not a public address"),
        ("http://8.8.8.8:8080/hook", (), "ports 80 and 443 only"),
        ("http://localhost:abc/hook", (), "invalid port"),
    ],
)
def test_callbacks_never_reach_private_addresses_or_odd_ports_unless_listed(url, allowed, problem):
    with pytest.raises(CallbackRefused, match=problem):
        resolve_target(url, JobsConfig(callback_hosts=allowed))


def test_listed_hosts_and_networks_may_be_reached():
    assert resolve_target("http://127.0.0.1:8123/hook", JobsConfig(callback_hosts=("127.0.0.1",))).port == 8123
    target = resolve_target("http://10.0.0.5/hook", JobsConfig(callback_hosts=("10.0.0.0/8",)))
    assert (target.address, target.port) == ("10.0.0.5", 80)
    assert resolve_target("https://8.8.8.8/hook", JobsConfig()).port == 443  # a public address needs no listing


LOOPBACK = JobsConfig(callback_hosts=("127.0.0.1",))


class Clock:
    def __init__(self) -> None:
        self.now_s = 1_000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now_s

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now_s += seconds


def test_delivery_retries_with_backoff_until_a_2xx():
    clock, answers, seen = Clock(), [500, 503, 204], []

    async def post(target, body, headers, timeout_s):
        seen.append(headers["X-Portrait-Signature"])
        status = answers.pop(0)
        if status == 503:
            raise httpx.ConnectError("refused")
        return status

    delivery = asyncio.run(
        deliver(
            "http://127.0.0.1/h", b"{}", "k", config=LOOPBACK, deadline_s=5_000, timeout_s=1,
            post=post, clock=clock, sleep=clock.sleep,
        )
    )  # fmt: skip
    assert (delivery.delivered, delivery.attempts, delivery.last_error) == (True, 3, None)
    assert clock.slept == [1.0, 2.0]
    assert [header.split(",")[0] for header in seen] == ["t=1000", "t=1001", "t=1003"]  # each attempt signed anew


def test_delivery_gives_up_at_the_deadline_with_the_last_error():
    clock = Clock()

    async def post(target, body, headers, timeout_s):
        return 500

    delivery = asyncio.run(
        deliver(
            "http://127.0.0.1/h", b"{}", "k", config=LOOPBACK, deadline_s=1_000 + 3_600, timeout_s=1,
            post=post, clock=clock, sleep=clock.sleep,
        )
    )  # fmt: skip
    assert (delivery.delivered, delivery.last_error) == (False, "HTTP 500")
    assert sum(clock.slept) <= 3_600 and max(clock.slept) == 300.0
    assert delivery.attempts == len(clock.slept) + 1
