"""Keys across two ingress replicas: no key → 401, a key limited to idphoto → 403 on restore, a key over its rate →
429 with Retry-After, counted over both replicas (the passes stay within one token bucket: burst + rate × time)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import httpx

from serve_app.auth import hash_key

FULL, IDPHOTO, SLOW = "pk_bench_full", "pk_bench_idphoto", "pk_bench_slow"
SLOW_RATE_PER_S, SLOW_BURST = 2.0, 4


def key_entries() -> list[dict]:
    return [
        {"id": "bench", "sha256": hash_key(FULL)},
        {"id": "bench-idphoto", "sha256": hash_key(IDPHOTO), "tasks": ["idphoto"]},
        {"id": "bench-slow", "sha256": hash_key(SLOW), "rate_per_s": SLOW_RATE_PER_S, "burst": SLOW_BURST},
    ]


@dataclass(frozen=True)
class KeyFigures:
    no_key: int
    wrong_task: int
    sent: int
    passed: int
    limited: int
    allowed_by_one_bucket: float
    retry_after: str | None
    elapsed_s: float


async def check_keys(url: str, photo: bytes, *, requests: int = 40, concurrency: int = 8) -> KeyFigures:
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        no_key = (await client.get("/v1/idphoto/specs")).status_code
        files = {"image": ("me.jpg", photo, "image/jpeg")}
        wrong = await client.post("/v1/restore", files=files, headers={"Authorization": f"Bearer {IDPHOTO}"})
        statuses: list[int] = []
        retry_after: list[str] = []
        gate = asyncio.Semaphore(concurrency)

        async def one() -> None:
            async with gate:
                answer = await client.get("/v1/idphoto/specs", headers={"Authorization": f"Bearer {SLOW}"})
                statuses.append(answer.status_code)
                if answer.status_code == 429:
                    retry_after.append(answer.headers.get("retry-after", ""))

        start = time.monotonic()
        await asyncio.gather(*(one() for _ in range(requests)))
        elapsed_s = time.monotonic() - start
    return KeyFigures(
        no_key=no_key,
        wrong_task=wrong.status_code,
        sent=requests,
        passed=statuses.count(200),
        limited=statuses.count(429),
        allowed_by_one_bucket=SLOW_BURST + SLOW_RATE_PER_S * elapsed_s,
        retry_after=retry_after[0] if retry_after else None,
        elapsed_s=round(elapsed_s, 2),
    )
