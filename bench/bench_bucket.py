"""Bucket events: event-to-result latency (p50/p99) and objects/s for a folder of small photos.

    .venv/bin/python bench/bench_bucket.py --photos 200 --concurrency 2            # in-process engines
    .venv/bin/python bench/bench_bucket.py --photos 200 --url http://127.0.0.1:8000 \\
        --inbox ./buckets/in --outbox ./buckets/out --token "$PORTRAIT_EVENTS_TOKEN"   # through a running Serve app

In-process (the default) runs the runner core (``BucketWorker``) over a local folder with ``in_process_backend``:

- ``burst``: all events at once (a bulk upload): objects/s, and latency including the wait for a slot;
- ``paced``: events at half the burst rate (steady uploads): latency close to one object's own time.

With ``--url`` the photos are written into the app's folder route (``--inbox``), a MinIO-shaped event per photo is
posted to ``/v1/events/s3``, and latency runs until the result's ``.json`` appears in ``--outbox``. Latency is event
(submit or POST) → result metadata written; every run writes to a fresh folder, so nothing is skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import shlex
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

import cv2
import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from deployments.common.image import encode_image  # noqa: E402
from serve_app.jobs import job_context  # noqa: E402
from serve_app.local_backend import in_process_backend  # noqa: E402
from serve_app.runner.outcomes import ObjectOutcome, Status  # noqa: E402
from serve_app.runner.routing import build_routing_table  # noqa: E402
from serve_app.runner.triggers.events import ObjectEvent  # noqa: E402
from serve_app.runner.worker import BucketWorker, job_executor  # noqa: E402
from serve_app.settings import Settings  # noqa: E402
from storage.local import LocalStore  # noqa: E402

logger = logging.getLogger("bench_bucket")
RESULT_TIMEOUT_S = 600.0


def small_photos(count: int, side_px: int) -> list[bytes]:
    """Distinct small portraits: the astronaut, cropped and shifted a little per photo."""
    from skimage import data

    rgb = np.ascontiguousarray(data.astronaut())
    photos = []
    for index in range(count):
        dx, dy = index % 17, (index // 17) % 13
        crop = rgb[20 + dy : 420 + dy, 56 + dx : 456 + dx]
        photos.append(encode_image(cv2.resize(crop, (side_px, side_px), interpolation=cv2.INTER_AREA), "jpeg"))
    return photos


def percentile_ms(values_s: list[float], q: float) -> float:
    return float(np.percentile(np.array(values_s) * 1000.0, q)) if values_s else float("nan")


async def run_in_process(folder: Path, photos: list[bytes], task: str, concurrency: int, rate_per_s: float | None):
    """Submit one event per photo (all at once, or at ``rate_per_s``); return (latencies_s, wall_s, statuses)."""
    settings = Settings()
    context = job_context(settings)
    inbox = LocalStore(folder / "in")
    keys = [f"p{index:04d}.jpg" for index in range(len(photos))]
    for key, data in zip(keys, photos):
        inbox.put(key, data, content_type="image/jpeg")
    table = build_routing_table(
        [{"name": "bench", "input": str(folder / "in"), "output": str(folder / "out"), "task": task}], context
    )
    submitted: dict[str, float] = {}
    latencies: list[float] = []
    statuses: list[Status] = []

    def finished(outcome: ObjectOutcome) -> None:
        latencies.append(time.perf_counter() - submitted[outcome.key])
        statuses.append(outcome.status)

    backend = in_process_backend(settings.open_model_store())
    worker = BucketWorker(
        table, job_executor(backend, context), context, max_concurrency=concurrency, on_outcome=finished
    )
    # Warm up the engines (first-call costs: interpreters, restorer) outside the measurement.
    await job_executor(backend, context)(task, photos[0], table.routes[0].params)
    started = time.perf_counter()
    for key in keys:
        submitted[key] = time.perf_counter()
        worker.submit([ObjectEvent("in", key, "s3:ObjectCreated:Put")])
        if rate_per_s:
            await asyncio.sleep(1.0 / rate_per_s)
    await worker.drain()
    return latencies, time.perf_counter() - started, statuses


def run_through_serve(url: str, token: str | None, inbox: Path, outbox: Path, photos: list[bytes], run_id: str):
    """Write photos into the app's folder route, post one webhook event each, wait for every result's ``.json``."""
    folder = f"bench-{run_id}"
    (inbox / folder).mkdir(parents=True, exist_ok=True)
    keys = [f"{folder}/p{index:04d}.jpg" for index in range(len(photos))]
    for key, data in zip(keys, photos):
        (inbox / key).write_bytes(data)
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    posted: dict[str, float] = {}
    started = time.perf_counter()
    for key in keys:
        record = {
            "eventName": "s3:ObjectCreated:Put",
            "s3": {"bucket": {"name": inbox.name}, "object": {"key": urllib.parse.quote_plus(key, safe="/")}},
        }
        body = json.dumps({"EventName": "s3:ObjectCreated:Put", "Key": f"{inbox.name}/{key}", "Records": [record]})
        request = urllib.request.Request(f"{url.rstrip('/')}/v1/events/s3", data=body.encode(), headers=headers)
        posted[key] = time.perf_counter()
        with urllib.request.urlopen(request, timeout=30) as reply:
            reply.read()
    pending = {key: outbox / (key.rsplit(".", 1)[0] + ".json") for key in keys}
    latencies: list[float] = []
    deadline = time.monotonic() + RESULT_TIMEOUT_S
    while pending and time.monotonic() < deadline:
        now = time.perf_counter()
        for key, path in list(pending.items()):
            if path.exists():
                latencies.append(now - posted[key])
                del pending[key]
        time.sleep(0.02)
    if pending:
        logger.error("%d results never appeared within %.0f s", len(pending), RESULT_TIMEOUT_S)
    return latencies, time.perf_counter() - started, [Status.DONE] * len(latencies)


def row(name: str, latencies: list[float], wall_s: float, statuses: list[Status]) -> str:
    done = sum(status is Status.DONE for status in statuses)
    return (
        f"| {name:<28} | {len(statuses):>7} | {done:>5} | {percentile_ms(latencies, 50):>8.0f} | "
        f"{percentile_ms(latencies, 99):>8.0f} | {len(statuses) / wall_s:>9.1f} |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--photos", type=int, default=200)
    parser.add_argument("--side-px", type=int, default=256, help="photo width and height")
    parser.add_argument("--task", default="restore")
    parser.add_argument("--concurrency", type=int, default=2, help="the runner's max_concurrency (in-process)")
    parser.add_argument("--url", help="a running Serve app; its folder route must read --inbox and write --outbox")
    parser.add_argument("--inbox", type=Path, default=Path("buckets/in"))
    parser.add_argument("--outbox", type=Path, default=Path("buckets/out"))
    parser.add_argument("--token", help="PORTRAIT_EVENTS_TOKEN of the app, when set")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    photos = small_photos(args.photos, args.side_px)
    header = (
        "| run                          | objects |  done | p50 (ms) | p99 (ms) | objects/s |\n"
        "|------------------------------|--------:|------:|---------:|---------:|----------:|"
    )
    rows = []
    if args.url:
        run_id = time.strftime("%Y%m%d-%H%M%S")
        rows.append(
            row(
                "serve webhook, burst",
                *run_through_serve(args.url, args.token, args.inbox.resolve(), args.outbox.resolve(), photos, run_id),
            )
        )
    else:
        with tempfile.TemporaryDirectory(prefix="bench-bucket-") as tmp:
            burst = asyncio.run(run_in_process(Path(tmp) / "burst", photos, args.task, args.concurrency, None))
            rows.append(row(f"in-process, burst, c={args.concurrency}", *burst))
            rate = 0.5 * len(burst[2]) / burst[1]
            paced = asyncio.run(run_in_process(Path(tmp) / "paced", photos, args.task, args.concurrency, rate))
            rows.append(row(f"in-process, paced {rate:.1f}/s", *paced))
    command = shlex.join([Path(sys.executable).name, *sys.argv])
    print(f"\n{command}\n{args.photos} photos of {args.side_px}x{args.side_px} px, task {args.task}\n")
    print("\n".join([header, *rows]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
