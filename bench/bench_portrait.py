"""The portrait job's cost on a CPU, on tiny random SDXL parts (tests/unit/render/tiny_sdxl.py) served under the
shipped names beside the shipped built-ins: what the job itself adds around a render (the gate, the face and matte,
the conditions, keep_face, the identity judge) and how the render grows with size, steps and ``count``. The tiny
parts make the render cheap, so the job's own phases show; SDXL's own figures need a GPU (bench/gpu/).

    .venv/bin/python -m bench.bench_portrait                 # a few sizes and counts, 5 runs each
    .venv/bin/python -m bench.bench_portrait --runs 10
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from skimage import data

from deployments.common.download import pull
from deployments.common.image import encode_image
from deployments.common.weights import ModelStore, load_manifest
from serve_app.jobs import job_context, parse_job_params, run_job
from serve_app.local_backend import in_process_backend
from serve_app.settings import Settings
from tests.unit.render.tiny_sdxl import SHIPPED_PARTS, as_shipped, build_mirror

REPO_ROOT = Path(__file__).resolve().parents[1]
# 256² only: the tiny VAE halves a side once where SDXL's divides it by 8, so at 512² the tiny UNet attends over 16×
# SDXL's latent tokens (a minute a render on a CPU) and says nothing about SDXL.
CASES = [  # (label, options)
    ("256², 2 steps", {"width": 256, "height": 256, "steps": 2}),
    ("256², 8 steps", {"width": 256, "height": 256, "steps": 8}),
    ("256², 2 steps, count 4", {"width": 256, "height": 256, "steps": 2, "count": 4}),
    ("256², 2 steps, hires", {"width": 256, "height": 256, "steps": 2, "hires": True}),
]


def store_with_tiny_parts(folder: Path) -> ModelStore:
    """The built-ins of ./models linked beside the tiny parts pulled from a folder mirror."""
    mirror, root = folder / "mirror", folder / "store"
    mirror.mkdir()
    root.mkdir()
    build_mirror(mirror)
    for child in (REPO_ROOT / "models").iterdir():
        (root / child.name).symlink_to(child)
    store = ModelStore(str(root), load_manifest(as_shipped(mirror, REPO_ROOT / "configs" / "models.yaml")))
    for outcome in pull(store, list(SHIPPED_PARTS), mirror=str(mirror)):
        if outcome.error:
            raise SystemExit(outcome.error)
    return store


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    photo = encode_image(np.ascontiguousarray(data.astronaut()[:320, 60:380]), "png")
    context = job_context(Settings())
    with tempfile.TemporaryDirectory() as folder:
        backend = in_process_backend(store_with_tiny_parts(Path(folder)))

        def once(options: dict) -> tuple[float, dict[str, float]]:
            params = parse_job_params("portrait", {"return": "json", "seed": 1, **options}, context)
            started = time.perf_counter()
            result = asyncio.run(run_job(backend, "portrait", photo, params, context))
            return time.perf_counter() - started, result.meta.timings_ms

        once(CASES[0][1])  # every model loaded
        phases = ("compliance", "analyze", "conditions", "render", "hires", "identity", "encode")
        print(f"| case | total s (p50) | {' | '.join(f'{phase} ms' for phase in phases)} |")
        print(f"|---|---|{'---|' * len(phases)}")
        for label, options in CASES:
            runs = [once(options) for _ in range(args.runs)]
            total = statistics.median(seconds for seconds, _ in runs)
            cells = [statistics.median(timings.get(phase, 0.0) for _, timings in runs) for phase in phases]
            print(f"| {label} | {total:.2f} | {' | '.join(f'{ms:.0f}' for ms in cells)} |", flush=True)


if __name__ == "__main__":
    main()
