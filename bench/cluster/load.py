"""The load: clients with retries, a ``/healthz`` poller, photos dropped into the route's folder, records watched."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np
from PIL import Image

from bench.load_test import JOB_ROUTES

RETRYABLE = (408, 429, 500, 502, 503, 504)


def small_portrait(side_px: int, seed: int) -> bytes:
    """The astronaut at ``side_px``, with a few random pixels so every upload has its own ETag."""
    from skimage import data

    rgb = np.array(Image.fromarray(data.astronaut()).resize((side_px, side_px)))  # a writable copy
    rng = np.random.default_rng(seed)
    rgb[rng.integers(0, side_px, 8), rng.integers(0, side_px, 8)] = rng.integers(0, 255, (8, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(rgb).save(buffer, format="JPEG", quality=88)
    return buffer.getvalue()


@dataclass
class Tally:
    sent: int = 0
    ok: int = 0
    attempts: int = 0
    failures: dict[str, int] = field(default_factory=dict)  # after every retry, by job and last answer
    retried: dict[str, int] = field(default_factory=dict)  # answers that made a client retry
    successes_at: list[float] = field(default_factory=list)
    health: list[tuple[float, str, float, dict]] = field(default_factory=list)  # (time, "code status", s, body)


async def one_job(client: httpx.AsyncClient, job: str, photo: bytes, retries: int, tally: Tally) -> None:
    route, fields = JOB_ROUTES[job]
    tally.sent += 1
    outcome = "?"
    for attempt in range(retries + 1):
        tally.attempts += 1
        wait_s = min(4.0, 0.25 * 2**attempt)
        try:
            answer = await client.post(route, files={"image": ("p.jpg", photo, "image/jpeg")}, data=fields)
        except httpx.HTTPError as exc:
            outcome = type(exc).__name__
        else:
            if answer.status_code == 200:
                tally.ok += 1
                tally.successes_at.append(time.monotonic())
                return
            outcome = f"{answer.status_code} {_error_code(answer)}".strip()
            if answer.status_code not in RETRYABLE:
                break
            wait_s = min(wait_s, float(answer.headers.get("retry-after", wait_s)))
        if attempt < retries:
            tally.retried[outcome] = tally.retried.get(outcome, 0) + 1
            await asyncio.sleep(wait_s)
    tally.failures[f"{job}:{outcome}"] = tally.failures.get(f"{job}:{outcome}", 0) + 1


def _error_code(answer: httpx.Response) -> str:
    """Our JSON error code (``unavailable``, ``timeout``...), or nothing when Serve's proxy answered in plain text."""
    with contextlib.suppress(ValueError, AttributeError, KeyError, TypeError):
        return str(answer.json()["error"]["code"])
    return ""


async def clients(url: str, count: int, until: float, retries: int, tally: Tally) -> None:
    photo = small_portrait(256, seed=0)
    jobs = list(JOB_ROUTES)

    async def loop(index: int) -> None:
        rng = random.Random(index)
        async with httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(60.0)) as client:
            while time.monotonic() < until:
                await one_job(client, rng.choice(jobs), photo, retries, tally)

    await asyncio.gather(*(loop(index) for index in range(count)))


async def health_poller(url: str, until: float, tally: Tally) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(30.0)) as client:
        while time.monotonic() < until:
            start = time.monotonic()
            try:
                answer = await client.get("/healthz")
                body = answer.json()
                seen = f"{answer.status_code} {body.get('status')}"
            except (httpx.HTTPError, ValueError) as exc:
                body, seen = {}, type(exc).__name__
            tally.health.append((start, seen, time.monotonic() - start, body))
            await asyncio.sleep(1.0)


async def uploader(inbox: Path, photos: int, every_s: float) -> list[str]:
    keys = []
    for index in range(photos):
        key = f"photo-{index:03d}.jpg"
        data = small_portrait(192 + 16 * (index % 4), seed=1000 + index)
        partial = inbox / f".{key}.part"  # written whole, then renamed: the poller never sees half a photo
        partial.write_bytes(data)
        partial.rename(inbox / key)
        keys.append(key)
        await asyncio.sleep(every_s)
    return keys


def record_writes(outbox: Path, seen: dict[str, set[str]]) -> None:
    """Each record's ``finished_at`` as seen now; a record rewritten later shows a second value (a duplicate)."""
    for path in list(outbox.glob("*.json")) + list((outbox / "_errors").glob("*.json")):
        with contextlib.suppress(OSError, ValueError):
            record = json.loads(path.read_text(encoding="utf-8"))
            written = record.get("finished_at") or record.get("failed_at")
            key = str(path.relative_to(outbox))
            seen.setdefault(key, set()).add(str(written))


async def record_watcher(outbox: Path, until_done: asyncio.Event, seen: dict[str, set[str]]) -> None:
    while not until_done.is_set():
        record_writes(outbox, seen)
        await asyncio.sleep(0.5)
    record_writes(outbox, seen)


def longest_gap_s(successes_at: list[float], start: float, end: float) -> float:
    points = [start, *sorted(successes_at), end]
    return max(later - earlier for earlier, later in zip(points, points[1:]))
