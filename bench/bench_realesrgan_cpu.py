"""CPU throughput of Real-ESRGAN ×4 and ×2 (RRDBNet, 23 blocks) on tiles, as ``upscale_image_realesrgan`` runs it.

Random weights in the official architectures (same FLOPs as the released files). For each scale prints the seconds of
one forward pass over a ``tile_px + 2*overlap_px`` window, the output megapixels per second that tile yields (its core
only, so the overlap's cost is counted), and what that means for a 12 MP photo.

    .venv/bin/python bench/bench_realesrgan_cpu.py --threads 2 --tile-px 128 --overlap-px 16 --repeats 2

``--weights`` times a real checkpoint instead (e.g. the built-in converted from the authors' ncnn export), and the
last column gives the process's CPU-seconds (``time.process_time``, all threads) per megapixel of input core: on a
shared, loaded box a steadier figure than wall time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from deployments.restore.realesrgan import (  # noqa: E402
    REALESRGAN_VARIANTS,
    build_realesrgan,
    load_realesrgan,
    output_to_rgb,
    rgb_to_input,
)

PHOTO_MEGAPIXELS = 12.0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default="realesrgan-x4plus,realesrgan-x2plus", help="REALESRGAN_VARIANTS keys")
    parser.add_argument("--tile-px", type=int, default=128, help="tile core side in input pixels")
    parser.add_argument("--overlap-px", type=int, default=16, help="context on each side of the core")
    parser.add_argument("--batch", type=int, default=1, help="tiles per forward pass")
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    parser.add_argument("--repeats", type=int, default=2, help="timed runs per point (after one warm-up)")
    parser.add_argument("--weights", type=Path, help="a Real-ESRGAN .pth to time instead of random weights")
    return parser.parse_args()


def time_tiles(variant: str, window_px: int, batch: int, repeats: int, weights: Path | None) -> tuple[float, float]:
    """Median wall and CPU seconds for pre-processing, one forward pass and post-processing of ``batch`` windows."""
    if weights is not None:
        model = load_realesrgan(weights, scale=REALESRGAN_VARIANTS[variant].scale)
    else:
        model = build_realesrgan(REALESRGAN_VARIANTS[variant]).eval().requires_grad_(False)
    pixels = np.random.default_rng(0).integers(0, 256, (batch, window_px, window_px, 3), dtype=np.uint8)
    seconds, cpu_seconds = [], []
    with torch.inference_mode():
        for run in range(repeats + 1):
            start, start_cpu = time.perf_counter(), time.process_time()
            output_to_rgb(model(rgb_to_input(pixels, device=torch.device("cpu"))))
            if run:
                seconds.append(time.perf_counter() - start)
                cpu_seconds.append(time.process_time() - start_cpu)
    return statistics.median(seconds), statistics.median(cpu_seconds)


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    window_px = args.tile_px + 2 * args.overlap_px
    print(
        f"torch {torch.__version__}, {args.threads} threads, {args.weights or 'random weights'}; tile {args.tile_px}"
        f" + 2×{args.overlap_px}"
        f" overlap = {window_px} px window, batch {args.batch}"
    )
    print(
        f"{'model':<19}{'s/batch':>9}{'s/tile':>8}{'out MP/s':>10}{f's/{PHOTO_MEGAPIXELS:g} MP photo':>18}"
        f"{'CPU-s/input MP':>16}"
    )
    for variant in args.variants.split(","):
        scale = REALESRGAN_VARIANTS[variant].scale
        seconds, cpu_seconds = time_tiles(variant, window_px, args.batch, args.repeats, args.weights)
        per_tile_s = seconds / args.batch
        core_input_mp = args.tile_px**2 / 1e6
        output_mp_per_s = core_input_mp * scale**2 / per_tile_s
        photo_s = PHOTO_MEGAPIXELS / core_input_mp * per_tile_s
        cpu_s_per_mp = cpu_seconds / args.batch / core_input_mp
        print(
            f"{variant:<19}{seconds:>9.2f}{per_tile_s:>8.2f}{output_mp_per_s:>10.4f}{photo_s:>18.0f}{cpu_s_per_mp:>16.0f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
