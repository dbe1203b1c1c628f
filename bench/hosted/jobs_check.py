"""60 jobs at concurrency 8 (a few bad inputs among them) while a model replica and the bucket runner are killed;
every job must end (succeeded, or failed with a 4xx-type code for the bad inputs), every callback verify, each id be
called back at least once, and each result equal the synchronous route's bytes."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field

import httpx

from bench.hosted.receiver import Receiver
from bench.load_test import percentile
from serve_app.runner.callbacks import verify

FINISHED = ("succeeded", "failed", "cancelled")
CLIENT_ERRORS = ("unsupported_image", "corrupt_image", "no_face", "invalid_parameter", "image_too_large")
# (task, form options): classic engines on this CPU
WORK = [("restore", {}), ("cartoon", {}), ("idphoto", {"spec": "cn-1inch"})]


@dataclass
class JobsFigures:
    submitted: int = 0
    submit_retries: int = 0
    submit_s: list[float] = field(default_factory=list)
    end_to_end_s: list[float] = field(default_factory=list)
    statuses: dict[str, int] = field(default_factory=dict)
    failed_codes: dict[str, int] = field(default_factory=dict)
    failed_not_input_errors: int = 0
    callbacks_per_job: dict[int, int] = field(default_factory=dict)
    bad_signatures: int = 0
    never_called_back: int = 0
    results_equal: int = 0
    results_different: int = 0
    killed: list[str] = field(default_factory=list)

    def summary(self) -> dict:
        return {
            "submitted": self.submitted,
            "submit_retries (503 while the runner restarted)": self.submit_retries,
            "submit_p50_ms": round(percentile(self.submit_s, 0.5) * 1000, 1),
            "submit_p99_ms": round(percentile(self.submit_s, 0.99) * 1000, 1),
            "end_to_end_p50_s": round(percentile(self.end_to_end_s, 0.5), 2),
            "end_to_end_p99_s": round(percentile(self.end_to_end_s, 0.99), 2),
            "statuses": self.statuses,
            "failed_codes": self.failed_codes,
            "failed_not_input_errors": self.failed_not_input_errors,
            "callbacks_per_job (count: jobs)": self.callbacks_per_job,
            "bad_signatures": self.bad_signatures,
            "never_called_back": self.never_called_back,
            "results_equal_to_sync": self.results_equal,
            "results_different": self.results_different,
            "killed": self.killed,
        }


def kill_replica(deployment: str) -> str | None:
    """Kill one replica of ``deployment`` through its actor name (Serve replaces it)."""
    import ray

    for actor in ray.util.list_named_actors(all_namespaces=True):
        if actor["name"].startswith("SERVE_REPLICA::") and f"#{deployment}#" in actor["name"]:
            ray.kill(ray.get_actor(actor["name"], namespace=actor["namespace"]), no_restart=False)
            return actor["name"]
    return None


async def run_jobs(
    url: str, key: str, secret: str, photos: list[bytes], *, jobs: int = 60, concurrency: int = 8, bad_every: int = 10
) -> JobsFigures:
    figures = JobsFigures()
    receiver = Receiver()
    callback_url = receiver.start()
    headers = {"Authorization": f"Bearer {key}"}
    plan = []
    for index in range(jobs):
        task, options = WORK[index % len(WORK)]
        photo = b"this is not a photo" if index % bad_every == bad_every - 1 else photos[index % len(photos)]
        plan.append((index, task, options, photo))
    submitted: dict[str, tuple[float, int]] = {}
    gate = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=120, headers=headers) as client:

        async def submit(index: int, task: str, options: dict, photo: bytes) -> None:
            form = {"task": task, "callback_url": callback_url, "idempotency_key": f"bench-{index}", **options}
            async with gate:
                while True:
                    start = time.time()
                    answer = await client.post("/v1/jobs", files={"image": ("p.jpg", photo, "image/jpeg")}, data=form)
                    if answer.status_code != 503:
                        break
                    figures.submit_retries += 1
                    await asyncio.sleep(float(answer.headers.get("retry-after", "1")))
            if answer.status_code not in (200, 202):
                raise RuntimeError(f"job {index}: {answer.status_code} {answer.text}")
            figures.submit_s.append(time.time() - start)
            submitted[answer.json()["id"]] = (start, index)

        killer = threading.Timer(4.0, lambda: figures.killed.extend(filter(None, map(kill_replica, KILLS))))
        killer.start()
        await asyncio.gather(*(submit(*item) for item in plan))
        figures.submitted = len(submitted)
        finals = await _wait_all(client, list(submitted))
        await _compare_with_sync(client, finals, plan, submitted, figures)
    await asyncio.sleep(2.0)  # callbacks still in flight for the last jobs
    _count(figures, finals, submitted, receiver, secret)
    return figures


KILLS = ("FaceAnalyzer", "BucketRunner")


async def _wait_all(client: httpx.AsyncClient, ids: list[str], timeout_s: float = 900) -> dict[str, dict]:
    finals: dict[str, dict] = {}
    deadline = time.time() + timeout_s
    while len(finals) < len(ids) and time.time() < deadline:
        for job_id in ids:
            if job_id not in finals:
                body = (await client.get(f"/v1/jobs/{job_id}")).json()
                if body.get("status") in FINISHED:
                    finals[job_id] = body
        await asyncio.sleep(1.0)
    return finals


async def _compare_with_sync(client, finals, plan, submitted, figures) -> None:
    sync_cache: dict[tuple[str, int], bytes] = {}
    for job_id, body in finals.items():
        if body["status"] != "succeeded":
            continue
        _, index = submitted[job_id]
        _, task, options, photo = plan[index]
        cache_key = (task, hash(photo))
        if cache_key not in sync_cache:
            files = {"image": ("p.jpg", photo, "image/jpeg")}
            sync_cache[cache_key] = (await client.post(f"/v1/{task}", files=files, data=options)).content
        stored = (await client.get(f"/v1/jobs/{job_id}/result")).content
        if stored == sync_cache[cache_key]:
            figures.results_equal += 1
        else:
            figures.results_different += 1


def _count(figures: JobsFigures, finals, submitted, receiver: Receiver, secret: str) -> None:
    per_job: dict[str, list[float]] = {}
    for call in receiver.calls:
        if not verify(secret, call.signature, call.body, now_s=call.at_s):
            figures.bad_signatures += 1
            continue
        per_job.setdefault(json.loads(call.body)["id"], []).append(call.at_s)
    for job_id, body in finals.items():
        figures.statuses[body["status"]] = figures.statuses.get(body["status"], 0) + 1
        if body["status"] == "failed":
            code = body["error"]["code"]
            figures.failed_codes[code] = figures.failed_codes.get(code, 0) + 1
            figures.failed_not_input_errors += code not in CLIENT_ERRORS
        calls = per_job.get(job_id, [])
        figures.callbacks_per_job[len(calls)] = figures.callbacks_per_job.get(len(calls), 0) + 1
        if not calls:
            figures.never_called_back += 1
        else:
            figures.end_to_end_s.append(min(calls) - submitted[job_id][0])
    figures.statuses["not finished"] = len(submitted) - len(finals)
