"""CPU throughput of the DCT-Net port (720p whole images and 288² head crops) and of the classic engine.

Uses the sample graph's weights (``../shared/dctnet_graph_sample/cartoon_h.pb``) when present, otherwise random weights
of the official shapes; speed does not depend on the weight values. Example:

    .venv/bin/python -m bench.bench_dctnet_cpu --threads 2 --batches 1 4 16 --repeats 2
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import cv2
import numpy as np
import torch

from deployments.cartoon.classic import cartoonize_classic
from deployments.cartoon.dctnet import DctNet, build_dctnet_from_constants, load_dctnet, official_weight_shapes

REPO_ROOT = Path(__file__).resolve().parents[1]
SAMPLE_GRAPH = REPO_ROOT.parent / "shared" / "dctnet_graph_sample" / "cartoon_h.pb"
SIZES_PX = {"720p": (720, 1280), "head288": (288, 288)}


def load_model(graph_path: Path) -> tuple[DctNet, str]:
    if graph_path.is_file():
        return load_dctnet(graph_path), f"weights from {graph_path}"
    rng = np.random.default_rng(0)
    shapes = official_weight_shapes()
    consts = {name: (rng.standard_normal(shape) * 0.05).astype(np.float32) for name, shape in shapes.items()}
    return build_dctnet_from_constants(consts, eps=1e-2), "random weights of the official shapes"


def time_s(run: Callable[[], object], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch intra-op threads")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--repeats", type=int, default=2, help="timed runs per point (median reported)")
    parser.add_argument("--sizes", nargs="+", default=list(SIZES_PX), choices=list(SIZES_PX))
    parser.add_argument("--graph", type=Path, default=SAMPLE_GRAPH)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    model, source = load_model(args.graph)
    print(f"torch {torch.__version__}, {args.threads} threads, {source}")
    print(f"{'input':>8} {'batch':>5} {'s/batch':>8} {'photos/s':>9} {'ms/photo':>9}")
    rng = np.random.default_rng(1)
    for size_name in args.sizes:
        height_px, width_px = SIZES_PX[size_name]
        # One warm-up image per size (oneDNN builds its kernels per shape); a warm-up per batch would double the run.
        model.forward_batch(torch.zeros((1, 3, height_px, width_px)))
        for batch in args.batches:
            images = torch.from_numpy(rng.integers(0, 256, (batch, 3, height_px, width_px)).astype(np.float32))
            seconds = statistics.median(time_s(partial(model.forward_batch, images), args.repeats))
            print(f"{size_name:>8} {batch:>5} {seconds:>8.2f} {batch / seconds:>9.2f} {1000 * seconds / batch:>9.0f}")

    cv2.setNumThreads(1)
    photo_rgb = rng.integers(0, 256, (720, 1280, 3), dtype=np.uint8)
    photo_rgb = cv2.GaussianBlur(photo_rgb, (0, 0), 3)  # photo-like smoothness, so the filters do realistic work
    cartoonize_classic(photo_rgb)
    classic_ms = 1000 * statistics.median(time_s(lambda: cartoonize_classic(photo_rgb), max(args.repeats, 5)))
    print(f"classic engine, 720p, 1 OpenCV thread: {classic_ms:.0f} ms/photo")


if __name__ == "__main__":
    main()
