"""What a hostile callback receiver costs the bucket runner (issue #32, finding 1), on loopback only, bounded in time.

The receivers run in a child process on 127.0.0.1 (their memory is not counted); this process plays the runner and
sends one callback attempt through the poster the runner uses (``callback_poster``, ``args.jobs.callback_timeout_s``
10 s), measuring its duration and this process's peak RSS growth (VmHWM, reset first) and traced Python allocations:

- ``endless``: 200 OK, then a body without a length until 1.5 GB are sent;
- ``drip``: the status line, then one header byte every 0.5 s for 30 s (every read gets something);
- ``many``: 200 callbacks at once through the runner's ``CallbackQueue`` (defaults: 16 at once) to a receiver that
  answers each after 1 s: the most connections it saw open at once, and how long all took.

``--before`` sends with the poster as it was before the fix (``client.post``: the whole answer read, httpx's per-read
timeouts only, no queue) for comparison. Scenarios: ``--only endless,drip,many``.

    .venv/bin/python bench/callback_abuse.py [--before] [--only endless,drip]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import sys
import time
import tracemalloc
import urllib.parse
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.unit.runner.abusive_receivers

import httpx  # noqa: E402

from serve_app.runner.callback_queue import CallbackQueue  # noqa: E402
from serve_app.runner.callbacks import Target, callback_poster, deliver, resolve_target, tls_context  # noqa: E402
from serve_app.runner.jobs_config import JobsConfig  # noqa: E402
from tests.unit.runner.abusive_receivers import (  # noqa: E402
    Abuse,
    dripping_headers,
    endless_body,
    read_request,
)

CONFIG = JobsConfig(callback_hosts=("127.0.0.1",))  # callback_timeout_s: the default, 10 s
ENDLESS_BYTES = 1_500_000_000
MANY = 200


def slow_answers(connections: multiprocessing.Value, peak: multiprocessing.Value):
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with connections.get_lock():
            connections.value += 1
            peak.value = max(peak.value, connections.value)
        try:
            await read_request(reader)
            await asyncio.sleep(1.0)
            writer.write(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
            await writer.drain()
        finally:
            with connections.get_lock():
                connections.value -= 1
            writer.close()

    return handle


def serve(port: multiprocessing.Value, connections: multiprocessing.Value, peak: multiprocessing.Value) -> None:
    """The receivers, in the child process: /endless, /drip and /slow on one port."""

    async def main() -> None:
        handlers = {
            "/endless": endless_body(Abuse(), limit_bytes=ENDLESS_BYTES),
            "/drip": dripping_headers(Abuse(), interval_s=0.5, stop_after_s=30.0),
            "/slow": slow_answers(connections, peak),
        }

        async def route(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            line = await reader.readuntil(b"\r\n")
            path = line.split(b" ")[1].decode()
            await handlers[path](reader, writer)  # it reads the rest of the request (up to the blank line, the body)

        server = await asyncio.start_server(route, "127.0.0.1", 0, backlog=1024)
        port.value = server.sockets[0].getsockname()[1]
        await server.serve_forever()

    asyncio.run(main())


async def old_post_to(target: Target, body: bytes, headers: dict[str, str], timeout_s: float, *, tls) -> int:
    """The poster before the fix: ``client.post`` reads the whole answer; httpx's timeouts are per read."""
    parsed = urllib.parse.urlsplit(target.url)
    pinned = parsed._replace(netloc=f"{target.address}:{target.port}").geturl()
    async with httpx.AsyncClient(timeout=timeout_s, follow_redirects=False, verify=tls) as client:
        answer = await client.post(pinned, content=body, headers={**headers, "Content-Type": "application/json"})
    return answer.status_code


def poster(before: bool):
    if not before:
        return callback_poster(CONFIG)
    tls = tls_context(CONFIG)
    return lambda target, body, headers, timeout_s: old_post_to(target, body, headers, timeout_s, tls=tls)


async def new_attempt(url: str, post) -> str:
    """One attempt as the runner makes it now (``deliver``, its deadline now)."""
    delivery = await deliver(url, b'{"id":"x"}', "k", config=CONFIG, deadline_s=time.time(), timeout_s=10.0, post=post)
    return "delivered" if delivery.delivered else f"failed ({delivery.last_error})"


async def old_attempt(url: str, post) -> str:
    """One attempt as the runner made it before the fix: no deadline over the whole attempt."""
    try:
        target = await asyncio.to_thread(resolve_target, url, CONFIG)
        status = await post(target, b'{"id":"x"}', {}, 10.0)
    except (httpx.HTTPError, OSError) as exc:
        return f"failed ({type(exc).__name__}: {exc})"
    return "delivered" if 200 <= status < 300 else f"failed (HTTP {status})"


def rss_mib(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise LookupError(field)


def one_attempt(url: str, before: bool) -> None:
    post = poster(before)  # built once per runner (its TLS trust), not per attempt
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    base = rss_mib("VmRSS")
    tracemalloc.start()
    started = time.monotonic()
    outcome = asyncio.run(old_attempt(url, post) if before else new_attempt(url, post))
    took_s = time.monotonic() - started
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"  attempt {took_s:6.2f} s, {outcome}")
    grown_mib, traced_mib = rss_mib("VmHWM") - base, traced_peak / 2**20
    print(f"  runner RSS {base:7.1f} MiB, peak +{grown_mib:8.1f} MiB; traced +{traced_mib:8.1f} MiB")


def many(url: str, before: bool, peak: multiprocessing.Value) -> None:
    queue = CallbackQueue.of(CONFIG)
    post = poster(before)

    async def run() -> None:
        async def one() -> None:
            await deliver(
                url, b'{"id":"x"}', "k", config=CONFIG, deadline_s=time.time(), timeout_s=10.0, post=post,
                slots=None if before else queue.slots,
            )  # fmt: skip

        await asyncio.gather(*(one() for _ in range(MANY)))

    started = time.monotonic()
    asyncio.run(run())
    took_s = time.monotonic() - started
    print(f"  {MANY} callbacks: at most {peak.value} connections open at once, all done in {took_s:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--before", action="store_true", help="the poster before the fix, for comparison")
    parser.add_argument("--only", default="endless,drip,many")
    args = parser.parse_args()
    context = multiprocessing.get_context("fork")
    port, connections, peak = context.Value("i", 0), context.Value("i", 0), context.Value("i", 0)
    receivers = context.Process(target=serve, args=(port, connections, peak), daemon=True)
    receivers.start()
    while not port.value:
        time.sleep(0.05)
    base = f"http://127.0.0.1:{port.value}"
    print(f"poster: {'before the fix (client.post)' if args.before else 'callback_poster'}; callback_timeout_s 10 s")
    try:
        for scenario in args.only.split(","):
            if scenario == "endless":
                print(f"endless body ({ENDLESS_BYTES / 1e9:.1f} GB at most):")
                one_attempt(base + "/endless", args.before)
            elif scenario == "drip":
                print("dripping headers (a byte every 0.5 s for 30 s):")
                one_attempt(base + "/drip", args.before)
            elif scenario == "many":
                print("many at once (each answered after 1 s):")
                many(base + "/slow", args.before, peak)
    finally:
        receivers.terminate()
        receivers.join(5)


if __name__ == "__main__":
    main()
