"""Memory of the Serve proxy and the ingress while a slow client downloads a large job result through Ray Serve.

A client that reads slowly must not make the server hold the result: if nothing pushed back, the ingress would read
the stored result as fast as the store gives it and the proxy would buffer what the client has not taken. This
stores a result of ``--mib`` MiB for a finished job (as ``bench/memory_download.py`` does, from a file), reads it at
``--kib-per-s`` for ``--seconds``, then drops the connection, sampling the resident memory (``/proc``) of Serve's
proxy actor and of the ingress replica; then downloads it again at full speed. Needs a running
``serve run configs/local.yaml`` on this machine with its jobs store in a folder (the default, under
``PORTRAIT_BUCKETS_ROOT``):

    PORTRAIT_BUCKETS_ROOT=/tmp/sd serve run configs/local.yaml   # after mkdir -p /tmp/sd/buckets/in
    python -m bench.slow_download --url http://127.0.0.1:8000 --buckets-root /tmp/sd --mib 256
"""

from __future__ import annotations

import argparse
import http.client
import json
import tempfile
import time
import urllib.parse
from pathlib import Path

import httpx
import numpy as np

from bench.memory_download import TASK, store_result
from deployments.common.image import encode_image
from serve_app.auth.caller import ANONYMOUS
from serve_app.jobs import JOBS
from serve_app.runner.jobs_config import JobsConfig
from serve_app.runner.jobs_layout import JobRef
from serve_app.runner.jobs_store import JobStore

CHUNK_BYTES = 64 * 1024
PROCESSES = {"proxy": "ProxyActor", "ingress": "Ingress"}  # a name in the process title Ray gives each actor


def serve_processes() -> dict[str, int]:
    """The pid of Serve's proxy and of the ingress replica, by their process titles."""
    found = {}
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            title = cmdline.read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        for name, marker in PROCESSES.items():
            if title.startswith("ray::") and marker in title:
                found[name] = int(cmdline.parent.name)
    missing = sorted(set(PROCESSES) - set(found))
    if missing:
        raise SystemExit(f"no running Serve process for {missing}: start `serve run configs/local.yaml` first")
    return found


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def finished_job(url: str) -> str:
    photo = encode_image(np.full((64, 64, 3), 128, np.uint8), "png")
    accepted = httpx.post(
        f"{url}/v1/jobs", files={"image": ("p.png", photo, "image/png")}, data={"task": TASK}, timeout=60
    )
    accepted.raise_for_status()
    job_id = accepted.json()["id"]
    for _ in range(600):
        status = httpx.get(f"{url}/v1/jobs/{job_id}", timeout=30).json()["status"]
        if status in ("succeeded", "failed"):
            if status == "failed":
                raise SystemExit(f"job {job_id} failed")
            return job_id
        time.sleep(0.5)
    raise SystemExit(f"job {job_id} did not finish")


def download(url: str, path: str, pids: dict[str, int], kib_per_s: float | None, seconds: float) -> dict:
    """Read ``path`` (at ``kib_per_s``, or as fast as it comes) for at most ``seconds``; the peak RSS growth."""
    parts = urllib.parse.urlsplit(url)
    baseline = {name: rss_mib(pid) for name, pid in pids.items()}
    peak = dict(baseline)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    connection.request("GET", path)
    answer = connection.getresponse()
    start, read = time.monotonic(), 0
    while time.monotonic() - start < seconds:
        chunk = answer.read(CHUNK_BYTES)
        if not chunk:
            break
        read += len(chunk)
        for name, pid in pids.items():
            peak[name] = max(peak[name], rss_mib(pid))
        if kib_per_s is not None:
            time.sleep(max(0.0, read / (kib_per_s * 1024) - (time.monotonic() - start)))
    elapsed_s = time.monotonic() - start
    connection.close()  # a slow client that leaves early
    time.sleep(2.0)
    after = {name: rss_mib(pid) for name, pid in pids.items()}
    return {
        "status": answer.status,
        "read_mib": round(read / (1 << 20), 1),
        "seconds": round(elapsed_s, 1),
        **{f"{name}_growth_mib": round(peak[name] - baseline[name], 1) for name in pids},
        **{f"{name}_after_close_mib": round(after[name] - baseline[name], 1) for name in pids},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--buckets-root", type=Path, required=True, help="PORTRAIT_BUCKETS_ROOT of the running app")
    parser.add_argument("--mib", type=int, default=256, help="size of the result")
    parser.add_argument("--kib-per-s", type=float, default=512.0, help="the slow client's reading rate")
    parser.add_argument("--seconds", type=float, default=30.0, help="how long the slow client reads")
    args = parser.parse_args()
    pids = serve_processes()
    job_id = finished_job(args.url)
    config = JobsConfig()
    store = JobStore(config.location(args.buckets_root), config.s3, JOBS)
    with tempfile.TemporaryDirectory(prefix="portrait-slow-download-") as folder:
        store_result(store, JobRef(ANONYMOUS, job_id), args.mib, Path(folder))
    path = f"/v1/jobs/{job_id}/result"
    report = {
        "result_mib": args.mib,
        "slow": download(args.url, path, pids, args.kib_per_s, args.seconds),
        "fast": download(args.url, path, pids, None, 600.0),
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
