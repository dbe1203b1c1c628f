"""Peak memory of the ingress process for one large upload to ``POST /v1/jobs``: a video of ``--mib`` MiB (a valid
MP4: a short clip padded with a ``free`` box) sent as a multipart form or as JSON ``image_b64`` (4/3 of it in base64),
in 64 KiB chunks, to the FastAPI app in-process, generated as it is sent (the client holds one chunk). The jobs
store is a temp folder; the job is queued, never run. Each row in a fresh process: after a small warm-up upload,
the peak resident set (``VmHWM``, reset through ``/proc/self/clear_refs`` first) minus the resident set before.

    .venv/bin/python bench/memory_upload.py                 # both shapes at the 512 MiB video cap
    .venv/bin/python bench/memory_upload.py --mib 256 --shape json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.asgi_bodies, tests.unit.video.clips

from serve_app.jobs import JOBS  # noqa: E402
from serve_app.jobs_api import JobsService  # noqa: E402
from serve_app.routes import create_api  # noqa: E402
from serve_app.runner.jobs_config import JobsConfig  # noqa: E402
from serve_app.runner.jobs_layout import JobRef  # noqa: E402
from serve_app.runner.jobs_store import JobStore  # noqa: E402
from serve_app.settings import Settings  # noqa: E402
from tests.asgi_bodies import MULTIPART, VideoBody, send_chunked  # noqa: E402
from tests.unit.video.clips import make_clip  # noqa: E402

SHAPES = {"multipart": MULTIPART, "json": "application/json"}


class NoRunner:
    """Jobs are stored and queued, never run: the ingress is measured."""

    async def enqueue(self, task: str, ref: JobRef) -> None:
        pass


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def one(shape: str, mib: int) -> dict:
    """One upload of ``mib`` MiB as ``shape``, in this process."""
    with tempfile.TemporaryDirectory(prefix="portrait-upload-bench-") as folder:
        config = JobsConfig.model_validate({"store": str(Path(folder) / "jobs")})
        store = JobStore(config.location(None), config.s3, JOBS)
        store.prepare()
        app = create_api()
        app.state.settings = Settings()
        app.state.jobs = JobsService(config, store, NoRunner())
        clip = make_clip(Path(folder) / "clip.mp4", seconds=0.4).read_bytes()
        warm = asyncio.run(send_chunked(app, "/v1/jobs", SHAPES[shape], VideoBody(clip, 1 << 20).parts(shape)))
        assert warm.status == 202, bytes(warm.body)
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
        before_kib = _status_kib("VmRSS")
        video = VideoBody(clip, mib << 20)
        started = time.monotonic()
        answer = asyncio.run(send_chunked(app, "/v1/jobs", SHAPES[shape], video.parts(shape)))
        seconds = time.monotonic() - started
        peak_kib = _status_kib("VmHWM")
    return {
        "shape": shape,
        "upload_mib": mib,
        "body_bytes": answer.bytes_read,
        "status": answer.status,
        "rss_before_mib": round(before_kib / 1024),
        "peak_above_mib": round((peak_kib - before_kib) / 1024, 1),
        "seconds": round(seconds, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=512, help="size of the video (the default cap: 512)")
    parser.add_argument("--shape", choices=[*SHAPES, "all"], default="all")
    parser.add_argument("--one", action="store_true", help="measure in this process (what each row runs)")
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.shape, args.mib)))
        return
    print("| upload | body bytes | status | RSS before MiB | peak above it MiB | seconds |")
    print("|---|---|---|---|---|---|")
    for shape in SHAPES if args.shape == "all" else [args.shape]:
        done = subprocess.run(
            [sys.executable, __file__, "--one", "--shape", shape, "--mib", str(args.mib)],
            capture_output=True,
            text=True,
            check=True,
        )
        row = json.loads(done.stdout.strip().splitlines()[-1])
        print(
            f"| {args.mib} MiB video, {shape} | {row['body_bytes']:,} | {row['status']} | {row['rss_before_mib']} | "
            f"{row['peak_above_mib']:,} | {row['seconds']} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
