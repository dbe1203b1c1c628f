"""CPU throughput of GPEN-256/512 and of the classic engine.

GPEN runs with the official architectures and *random* weights (same FLOPs and memory traffic as the released
files, which this benchmark does not need). Prints faces/s per batch size, then the classic engine's ms per 512 crop.

    .venv/bin/python bench/bench_gpen_cpu.py --threads 2 --batches 1,4,16 --repeats 2
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from deployments.restore.classic import restore_face_classic  # noqa: E402
from deployments.restore.gpen import GPEN_VARIANTS, build_gpen  # noqa: E402


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default="gpen-bfr-256,gpen-bfr-512", help="comma-separated GPEN_VARIANTS keys")
    parser.add_argument("--batches", default="1,4,16", help="comma-separated batch sizes")
    parser.add_argument("--batches-512", default=None, help="batch sizes for GPEN-512 only (default: --batches)")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch and OpenCV threads")
    parser.add_argument("--repeats", type=int, default=2, help="timed runs per point (after one warm-up)")
    return parser.parse_args()


def time_gpen(variant: str, batch: int, repeats: int) -> float:
    """Median seconds for one forward pass of ``batch`` faces."""
    model = build_gpen(GPEN_VARIANTS[variant]).eval().requires_grad_(False)
    size = model.config.size
    faces = torch.rand(batch, 3, size, size) * 2 - 1
    seconds = []
    with torch.inference_mode():
        model(faces)
        for _ in range(repeats):
            start = time.perf_counter()
            model(faces)
            seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def time_classic(repeats: int) -> float:
    """Median ms of ``restore_face_classic`` on a 512×512 noisy real photo."""
    from skimage import data

    rng = np.random.default_rng(0)
    crop = np.clip(data.astronaut() + rng.normal(0.0, 15.0, (512, 512, 3)), 0, 255).astype(np.uint8)
    restore_face_classic(crop)
    ms = []
    for _ in range(max(repeats, 5)):
        start = time.perf_counter()
        restore_face_classic(crop)
        ms.append((time.perf_counter() - start) * 1000)
    return statistics.median(ms)


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    cv2.setNumThreads(args.threads)
    batches = [int(b) for b in args.batches.split(",")]
    print(f"torch {torch.__version__}, {args.threads} threads, random weights (official architectures)")
    print(f"{'model':<14}{'batch':>6}{'s/batch':>10}{'faces/s':>10}{'s/face':>9}")
    for variant in args.variants.split(","):
        sizes = batches
        if GPEN_VARIANTS[variant].size == 512 and args.batches_512:
            sizes = [int(b) for b in args.batches_512.split(",")]
        for batch in sizes:
            seconds = time_gpen(variant, batch, args.repeats)
            print(f"{variant:<14}{batch:>6}{seconds:>10.2f}{batch / seconds:>10.2f}{seconds / batch:>9.2f}", flush=True)
    print(f"classic engine: {time_classic(args.repeats):.1f} ms per 512x512 crop ({args.threads} threads)")


if __name__ == "__main__":
    main()
