"""Peak RSS of downloading one large asynchronous-job result (``GET /v1/jobs/{id}/result``) in-process: a job is
submitted to the real app with a jobs store in a temp folder, its result written as the runner writes a video's (from
a file, ``put_file``), then downloaded with the test client, the body read and dropped chunk by chunk. Prints the
process's peak RSS before and after the download and their difference, for ``--return image`` (the bytes) or
``json`` (base64 inside JSON). Run it in a fresh process per measurement:

    .venv/bin/python bench/memory_download.py --mib 256 --return image
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from fastapi.testclient import TestClient

from deployments.common.image import encode_image
from serve_app.auth.caller import ANONYMOUS
from serve_app.jobs import JOBS
from serve_app.jobs.results import JobResult
from serve_app.jobs_api import JobsService
from serve_app.routes import create_api
from serve_app.runner.jobs_config import JobsConfig, within
from serve_app.runner.jobs_layout import JobRef
from serve_app.runner.jobs_store import JobStore
from serve_app.runner.records import ResultRecord, output_key, record_names, unread_source, write_result
from serve_app.schemas import ResultMeta
from serve_app.settings import Settings
from storage.base import open_store

TASK = "cartoon"
MEDIA_TYPE = "image/png"


class NoRunner:
    """Jobs are stored, never run: the bench writes the result itself."""

    async def enqueue(self, task: str, ref: JobRef) -> None:
        pass


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def store_result(store: JobStore, ref: JobRef, size_mib: int, folder: Path) -> None:
    """A result of ``size_mib`` MiB of random bytes, written as the runner writes a video's: from its file."""
    path = folder / "result.bin"
    with open(path, "wb") as file:
        for _ in range(size_mib):
            file.write(os.urandom(1 << 20))
    size_bytes = size_mib << 20
    meta = ResultMeta(
        job=TASK, params={}, engine="bench", width=1, height=1, media_type=MEDIA_TYPE, bytes=size_bytes, version="0"
    )
    result = JobResult(body=path, media_type=MEDIA_TYPE, meta=meta)
    now = datetime.now(UTC)
    record = ResultRecord(
        source=unread_source(store.location, ref.key, None),
        route=f"jobs-{TASK}",
        task=TASK,
        params={},
        result_key=output_key(ref.key, result),
        meta=meta,
        uploaded_at=now,
        finished_at=now,
        event_lag_s=0.0,
        attempts=1,
    )
    write_result(open_store(within(store.location, "out", TASK)), record_names(ref.key), result, record)
    path.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=256, help="size of the result")
    parser.add_argument("--return", dest="return_", choices=["image", "json"], default="image")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="portrait-download-") as folder:
        config = JobsConfig.model_validate({"store": str(Path(folder) / "jobs")})
        store = JobStore(config.location(None), config.s3, JOBS)
        store.prepare()
        app = create_api()
        app.state.settings = Settings()
        app.state.jobs = JobsService(config, store, NoRunner())
        with TestClient(app) as client:
            photo = encode_image(np.zeros((64, 64, 3), np.uint8), "png")
            fields = {"task": TASK, "return": args.return_}
            accepted = client.post("/v1/jobs", files={"image": ("me.png", photo, MEDIA_TYPE)}, data=fields)
            accepted.raise_for_status()
            job_id = accepted.json()["id"]
            store_result(store, JobRef(ANONYMOUS, job_id), args.mib, Path(folder))
            before_mib = peak_rss_mib()
            with client.stream("GET", f"/v1/jobs/{job_id}/result") as answer:
                for _ in answer.iter_bytes():
                    pass
            after_mib = peak_rss_mib()
    report = {
        "result_mib": args.mib,
        "return": args.return_,
        "status": answer.status_code,
        "body_bytes": answer.num_bytes_downloaded,
        "peak_rss_before_mib": round(before_mib),
        "peak_rss_after_mib": round(after_mib),
        "download_mib": round(after_mib - before_mib),
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
