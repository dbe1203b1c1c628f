"""``python -m bench.hosted``: keys across two ingress replicas, the jobs API under faults, then retention (one Ray
cluster on this box, shut down at the end). Prints one JSON object with every figure."""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import signal
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

from bench.hosted.jobs_check import run_jobs
from bench.hosted.keys_check import FULL, check_keys, key_entries
from bench.hosted.retention_check import check_retention
from bench.hosted.service import running_service

CALLBACK_SECRET = "bench-callback-secret"


def small_photos(sides: tuple[int, ...] = (160, 192, 224)) -> list[bytes]:
    from skimage import data

    photos = []
    for side in sides:
        image = Image.fromarray(np.ascontiguousarray(data.astronaut())).resize((side, side))
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=85)
        photos.append(buffer.getvalue())
    return photos


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # `timeout` still shuts the Ray cluster down
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=60)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--phases", default="keys,jobs,retention", help="which checks to run, in this order")
    options = parser.parse_args()
    phases = options.phases.split(",")
    root = Path(tempfile.mkdtemp(prefix="bench-hosted-"))
    (root / "buckets" / "in").mkdir(parents=True)
    keys = [
        {**entry, "callback_secret": CALLBACK_SECRET} if entry["id"] == "bench" else entry for entry in key_entries()
    ]
    jobs = {"store": str(root / "jobs"), "callback_hosts": ["127.0.0.1"], "retention_s": 3600}
    args = {"auth": {"keys": keys}, "jobs": jobs}
    photos = small_photos()
    expiring = {**args, "jobs": {**jobs, "retention_s": 5, "sweep_interval_s": 5}}
    report = {}
    with running_service(
        expiring if phases == ["retention"] else args, {"PORTRAIT_BUCKETS_ROOT": str(root)}
    ) as service:
        if "keys" in phases:
            report["keys"] = asyncio.run(check_keys(service.url, photos[0])).__dict__
            print(json.dumps(report["keys"]), flush=True)
        if "jobs" in phases:
            figures = asyncio.run(
                run_jobs(service.url, FULL, CALLBACK_SECRET, photos, jobs=options.jobs, concurrency=options.concurrency)
            )
            report["jobs"] = figures.summary()
            print(json.dumps(report["jobs"]), flush=True)
        if "retention" in phases:
            if phases != ["retention"]:
                service.redeploy(expiring)
            report["retention"] = asyncio.run(check_retention(service.url, FULL, photos[0], root / "jobs"))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
