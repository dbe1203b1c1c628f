"""Load, fault and soak tests against a running service (bounded loops, 127.0.0.1 by default; they stop by themselves).

    # mixed jobs at increasing concurrency: throughput and p50/p99 per step
    python bench/load_test.py --url http://127.0.0.1:8000 --steps 1,2,4,8 --requests 24
    # the same while a replica of each named deployment is killed every 10 s (Ray's API; needs the cluster address)
    python bench/load_test.py --kill FaceAnalyzer,FaceRestorer512 --kill-every-s 10
    # soak: hold one concurrency for N minutes and track each replica's memory (RSS) for leaks
    python bench/load_test.py --soak-minutes 30 --steps 4

Clients retry 503s (honouring ``Retry-After``) and connection errors up to ``--retries`` times; a request counts as
failed only after that, as a user's client would see it.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import random
import statistics
import threading
import time
from dataclasses import dataclass, field

import httpx
import numpy as np
from PIL import Image

JOB_ROUTES = {
    "faces": ("/v1/faces", {}),
    "restore": ("/v1/restore", {"model": "gpen-bfr-256"}),
    "idphoto": ("/v1/idphoto", {"spec": "cn-1inch"}),
    "cartoon": ("/v1/cartoon", {"style": "anime"}),
}


@dataclass
class StepResult:
    latencies_s: list[float] = field(default_factory=list)
    failures: dict[str, int] = field(default_factory=dict)
    retries: int = 0


def portrait_jpeg() -> bytes:
    from skimage import data

    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(data.astronaut())).save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


async def one_request(client: httpx.AsyncClient, job: str, photo: bytes, retries: int, result: StepResult) -> None:
    route, fields = JOB_ROUTES[job]
    start = time.perf_counter()
    for attempt in range(retries + 1):
        try:
            answer = await client.post(route, files={"image": ("p.jpg", photo, "image/jpeg")}, data=fields)
        except httpx.HTTPError as exc:
            outcome, wait_s = type(exc).__name__, 0.5 * 2**attempt
        else:
            if answer.status_code == 200:
                result.latencies_s.append(time.perf_counter() - start)
                return
            outcome = str(answer.status_code)
            wait_s = float(answer.headers.get("retry-after", 0.5 * 2**attempt))
            if answer.status_code not in (429, 500, 502, 503, 504):
                break
        if attempt < retries:
            result.retries += 1
            await asyncio.sleep(min(wait_s, 10.0))
    result.failures[f"{job}:{outcome}"] = result.failures.get(f"{job}:{outcome}", 0) + 1


async def run_step(
    url: str, jobs: list[str], concurrency: int, requests: int, retries: int, photo: bytes, deadline_s: float
) -> tuple[StepResult, float]:
    result = StepResult()
    semaphore = asyncio.Semaphore(concurrency)
    rng = random.Random(concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(300.0)) as client:

        async def bounded(job: str) -> None:
            async with semaphore:
                if time.monotonic() < deadline_s:
                    await one_request(client, job, photo, retries, result)

        start = time.perf_counter()
        await asyncio.gather(*(bounded(rng.choice(jobs)) for _ in range(requests)))
    return result, time.perf_counter() - start


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class ReplicaKiller(threading.Thread):
    """Kills one live replica of each named deployment every ``every_s`` seconds until stopped."""

    def __init__(self, address: str, deployments: list[str], every_s: float) -> None:
        super().__init__(daemon=True)
        self.deployments, self.every_s, self.killed = deployments, every_s, 0
        self._stop_event = threading.Event()
        import ray

        ray.init(address=address, namespace="serve", log_to_driver=False, ignore_reinit_error=True)

    def run(self) -> None:
        while not self._stop_event.wait(self.every_s):
            for deployment in self.deployments:
                name = kill_one_replica(deployment)
                if name:
                    self.killed += 1
                    print(f"  killed {name}", flush=True)

    def stop(self) -> None:
        self._stop_event.set()


def kill_one_replica(deployment: str) -> str | None:
    """Kill one live replica of ``deployment`` (Serve starts a new one); its actor name, or None if none was up."""
    import ray
    from ray.util.state import list_actors

    alive = [
        a
        for a in list_actors(filters=[("state", "=", "ALIVE")], limit=1000)
        if a.name and a.name.startswith("SERVE_REPLICA::") and f"#{deployment}#" in a.name
    ]
    if not alive:
        return None
    ray.kill(ray.get_actor(alive[0].name, namespace="serve"), no_restart=False)
    return alive[0].name


def replica_memory_mib() -> dict[str, float]:
    """RSS of every Serve replica process on this machine."""
    from ray.util.state import list_actors

    memory = {}
    for actor in list_actors(filters=[("state", "=", "ALIVE")], limit=1000):
        if actor.name and actor.name.startswith("SERVE_REPLICA::") and actor.pid:
            try:
                with open(f"/proc/{actor.pid}/status", encoding="ascii") as status:
                    rss_kib = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
            except (OSError, StopIteration):
                continue
            memory[actor.name.split("::", 1)[1]] = rss_kib / 1024
    return memory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--jobs", default="faces,restore,idphoto,cartoon")
    parser.add_argument("--steps", default="1,2,4,8", help="concurrency per step")
    parser.add_argument("--requests", type=int, default=24, help="requests per step")
    parser.add_argument("--retries", type=int, default=3)
    parser.add_argument("--max-step-s", type=float, default=600.0, help="a step stops starting requests after this")
    parser.add_argument("--kill", default="", help="deployments whose replicas get killed during the load")
    parser.add_argument("--kill-every-s", type=float, default=10.0)
    parser.add_argument("--ray-address", default="auto")
    parser.add_argument("--soak-minutes", type=float, default=0.0)
    args = parser.parse_args()
    jobs = args.jobs.split(",")
    photo = portrait_jpeg()
    killer = ReplicaKiller(args.ray_address, args.kill.split(","), args.kill_every_s) if args.kill else None
    if killer:
        killer.start()
    print(
        f"{args.url} jobs={jobs} retries={args.retries}"
        + (f" killing {args.kill} every {args.kill_every_s}s" if killer else "")
    )
    print("| concurrency | requests | ok | failed (after retries) | retries | req/s | p50 s | p99 s |")
    print("|---|---|---|---|---|---|---|---|")
    steps = [int(step) for step in args.steps.split(",")]
    if args.soak_minutes:
        soak(args, jobs, photo, steps[-1])
    else:
        ramp(args, jobs, photo, steps)
    if killer:
        killer.stop()
        print(f"replicas killed: {killer.killed}")


def ramp(args: argparse.Namespace, jobs: list[str], photo: bytes, steps: list[int]) -> None:
    for concurrency in steps:
        result, wall_s = asyncio.run(
            run_step(
                args.url, jobs, concurrency, args.requests, args.retries, photo, time.monotonic() + args.max_step_s
            )
        )
        ok = len(result.latencies_s)
        print(
            f"| {concurrency} | {args.requests} | {ok} | {sum(result.failures.values())} {result.failures or ''} | "
            f"{result.retries} | {ok / wall_s:.2f} | {percentile(result.latencies_s, 0.5):.2f} | "
            f"{percentile(result.latencies_s, 0.99):.2f} |",
            flush=True,
        )


def soak(args: argparse.Namespace, jobs: list[str], photo: bytes, concurrency: int) -> None:
    import ray

    ray.init(address=args.ray_address, namespace="serve", log_to_driver=False, ignore_reinit_error=True)
    end = time.monotonic() + args.soak_minutes * 60
    first = replica_memory_mib()
    while time.monotonic() < end:
        result, wall_s = asyncio.run(run_step(args.url, jobs, concurrency, args.requests, args.retries, photo, end))
        now = replica_memory_mib()
        growth = {name: now[name] - first[name] for name in now if name in first}
        worst = max(growth.items(), key=lambda item: item[1], default=("-", 0.0))
        print(
            f"| {concurrency} | {args.requests} | {len(result.latencies_s)} | {sum(result.failures.values())} | "
            f"{result.retries} | {len(result.latencies_s) / wall_s:.2f} | "
            f"{percentile(result.latencies_s, 0.5):.2f} | {percentile(result.latencies_s, 0.99):.2f} | "
            f"max RSS growth {worst[0]} {worst[1]:+.0f} MiB",
            flush=True,
        )
    last = replica_memory_mib()
    print(
        "replica RSS MiB, start -> end:",
        {name: f"{first[name]:.0f} -> {last[name]:.0f}" for name in last if name in first},
    )
    print("median growth MiB:", statistics.median([last[name] - first[name] for name in last if name in first] or [0]))


if __name__ == "__main__":
    main()
