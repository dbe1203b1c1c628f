"""What the identity judge adds to a single-portrait restore, in CPU seconds of this process and in wall seconds (the
latency a user sees; on a shared 2-core box it also says something about the neighbours): the same restore with the
judge, and without it (a backend
whose app has no ``IdentityJudge``, as an older Serve YAML: the result then says why it has no identity).

    python bench/bench_identity_cost.py [--runs 10] [--image path]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import skimage.data

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from deployments.common.image import encode_image  # noqa: E402
from deployments.common.settings import get_model_settings  # noqa: E402
from deployments.common.stage import StageCall  # noqa: E402
from deployments.identity.types import EMBED_FACE  # noqa: E402
from serve_app.backend import Backend, not_deployed  # noqa: E402
from serve_app.jobs import job_context, parse_job_params, run_job  # noqa: E402
from serve_app.local_backend import in_process_backend  # noqa: E402
from serve_app.settings import Settings  # noqa: E402


class WithoutJudge(Backend):
    def __init__(self, backend: Backend) -> None:
        super().__init__(backend.transport, backend.context)

    async def call(self, call: StageCall, *args, **options):
        if call == EMBED_FACE:
            raise not_deployed(call.deployment, {})
        return await super().call(call, *args, **options)


def spent_seconds(backend: Backend, photo: bytes, runs: int) -> tuple[list[float], list[float], dict]:
    """CPU seconds and wall seconds of each run (the faces before are embedded in a worker thread while they are
    restored in another, as on two replicas in Serve)."""
    context = job_context(Settings())
    params = parse_job_params("restore", {"return": "json"}, context)
    asyncio.run(run_job(backend, "restore", photo, params, context))  # loads every model once
    cpu, wall = [], []
    for _ in range(runs):
        started, started_wall = time.process_time(), time.perf_counter()
        result = asyncio.run(run_job(backend, "restore", photo, params, context))
        cpu.append(time.process_time() - started)
        wall.append(time.perf_counter() - started_wall)
    return cpu, wall, result.meta.identity or {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--image", type=Path, default=None)
    args = parser.parse_args()
    rgb = np.asarray(skimage.data.astronaut()) if args.image is None else None
    photo = args.image.read_bytes() if args.image else encode_image(rgb, "jpeg")
    backend = in_process_backend(get_model_settings().open_model_store())
    with_judge, with_judge_wall, identity = spent_seconds(backend, photo, args.runs)
    without, without_wall, missing = spent_seconds(WithoutJudge(backend), photo, args.runs)
    base, judged = statistics.median(without), statistics.median(with_judge)
    base_wall, judged_wall = statistics.median(without_wall), statistics.median(with_judge_wall)
    print(
        json.dumps(
            {
                "photo": str(args.image or "skimage astronaut 512x512"),
                "runs": args.runs,
                "restore_cpu_s_without_judge": round(base, 3),
                "restore_cpu_s_with_judge": round(judged, 3),
                "growth_percent": round(100 * (judged - base) / base, 1),
                "restore_wall_s_without_judge": round(base_wall, 3),
                "restore_wall_s_with_judge": round(judged_wall, 3),
                "wall_growth_percent": round(100 * (judged_wall - base_wall) / base_wall, 1),
                "identity": identity,
                "without_judge_says": missing,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
