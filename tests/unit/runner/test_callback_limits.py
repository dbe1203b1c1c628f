"""What a callback receiver can make the bucket runner spend (issue #32, finding 1): real receivers on 127.0.0.1 that
answer an endless body or drip their headers, against the poster the runner sends with. One attempt costs the runner a
few KiB and at most ``callback_timeout_s``, whatever the receiver does."""

from __future__ import annotations

import asyncio
import time
import tracemalloc

from serve_app.runner.callbacks import callback_poster, deliver
from serve_app.runner.jobs_config import JobsConfig
from tests.unit.runner.abusive_receivers import Abuse, dripping_headers, endless_body, serving

LOOPBACK = JobsConfig(callback_hosts=("127.0.0.1",))
MIB = 1 << 20


def one_attempt(url: str, timeout_s: float):
    """One delivery attempt (its deadline is now), through the poster the runner uses."""
    return deliver(
        url, b'{"id":"x"}', "k", config=LOOPBACK, deadline_s=time.time(), timeout_s=timeout_s,
        post=callback_poster(LOOPBACK),
    )  # fmt: skip


def test_an_endless_answer_body_is_not_read_and_costs_the_runner_no_memory():
    abuse = Abuse()

    async def run():
        async with serving(endless_body(abuse, limit_bytes=256 * MIB)) as url:
            tracemalloc.start()
            started = time.monotonic()
            delivery = await one_attempt(url, timeout_s=5.0)
            took_s = time.monotonic() - started
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            for _ in range(100):  # the receiver sees the connection close
                if abuse.hung_up_after_s is not None:
                    break
                await asyncio.sleep(0.02)
        return delivery, took_s, peak

    delivery, took_s, peak = asyncio.run(run())
    assert (delivery.delivered, delivery.attempts) == (True, 1)  # the status is what counts: 200
    assert peak < 4 * MIB, f"the runner held {peak / MIB:.1f} MiB for the answer"
    assert took_s < 2.0
    assert abuse.hung_up_after_s is not None and abuse.hung_up_after_s < 2.0
    assert abuse.sent < 64 * MIB  # what the sockets' buffers took before the runner hung up, not a read body


def test_a_receiver_dripping_its_headers_cannot_hold_an_attempt_past_callback_timeout_s():
    abuse = Abuse()

    async def run():
        async with serving(dripping_headers(abuse, interval_s=0.1, stop_after_s=6.0)) as url:
            started = time.monotonic()
            delivery = await one_attempt(url, timeout_s=1.0)
            return delivery, time.monotonic() - started

    delivery, took_s = asyncio.run(run())
    assert took_s < 1.0 + 0.5, f"one attempt took {took_s:.2f} s"
    assert (delivery.delivered, delivery.attempts) == (False, 1)
    assert delivery.last_error.startswith("TimeoutError: the attempt took longer than callback_timeout_s (1 s)")
    assert abuse.sent >= 5  # it did drip: every read of the runner got a byte
