"""With ``retention_s: 5``: jobs answer 410 once expired, and their objects leave the jobs store within a minute."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx


async def check_retention(url: str, key: str, photo: bytes, store: Path, *, jobs: int = 3) -> dict:
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=url, timeout=120, headers=headers) as client:
        ids = []
        for _ in range(jobs):
            answer = await client.post(
                "/v1/jobs", files={"image": ("p.jpg", photo, "image/jpeg")}, data={"task": "cartoon"}
            )
            ids.append(answer.json()["id"])
        submitted_at = time.time()
        statuses = {}
        while len(statuses) < jobs and time.time() - submitted_at < 120:
            for job_id in ids:
                body = (await client.get(f"/v1/jobs/{job_id}")).json()
                if body.get("status") in ("succeeded", "failed"):
                    statuses.setdefault(job_id, body["status"])
            await asyncio.sleep(0.5)
        gone_after_s = objects_gone_after_s = None
        while time.time() - submitted_at < 120 and (gone_after_s is None or objects_gone_after_s is None):
            codes = [(await client.get(f"/v1/jobs/{job_id}")).status_code for job_id in ids]
            if gone_after_s is None and codes == [410] * jobs:
                gone_after_s = round(time.time() - submitted_at, 1)
            left = [path for path in store.rglob("*") if path.is_file() and any(job_id in path.name for job_id in ids)]
            if objects_gone_after_s is None and not left:
                objects_gone_after_s = round(time.time() - submitted_at, 1)
            await asyncio.sleep(0.5)
    return {
        "retention_s": 5,
        "statuses_before_expiry": sorted(statuses.values()),
        "all_410_after_submit_s": gone_after_s,
        "objects_gone_after_submit_s": objects_gone_after_s,
    }
