"""CPU throughput of the neural face restorers, by model name.

Every model runs with its official architecture and *random* weights (same FLOPs and memory traffic as the released
files, which this benchmark does not need), on random faces at the model's own crop size. Prints faces/s per batch.

    .venv/bin/python bench/bench_restorers_cpu.py --models gfpgan-v1.4 --threads 2 --batches 1,4 --repeats 2

To add a model, add one entry to ``RESTORERS``: a function returning the model in eval mode and its crop size.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from deployments.restore.codeformer import CODEFORMER_512, CodeFormer, build_codeformer  # noqa: E402
from deployments.restore.gfpgan import GFPGAN_VARIANTS, GfpganConfig, build_gfpgan  # noqa: E402
from deployments.restore.gpen import GPEN_VARIANTS, GpenConfig, build_gpen  # noqa: E402


def _gpen(config: GpenConfig) -> tuple[nn.Module, int]:
    return build_gpen(config), config.size


def _gfpgan(config: GfpganConfig) -> tuple[nn.Module, int]:
    return build_gfpgan(config), config.out_size


class _FixedFidelity(nn.Module):
    """CodeFormer with its fidelity weight bound, so it is timed as ``model(faces)`` like the others."""

    def __init__(self, model: CodeFormer, w: float) -> None:
        super().__init__()
        self.model = model
        self.w = w

    def forward(self, faces: torch.Tensor) -> torch.Tensor:
        return self.model(faces, self.w)


def _codeformer() -> tuple[nn.Module, int]:
    """At the official default w = 0.5 (any w > 0 runs the fusion blocks; w = 0 skips them and is cheaper)."""
    return _FixedFidelity(build_codeformer(CODEFORMER_512), 0.5), CODEFORMER_512.size_px


RESTORERS: dict[str, Callable[[], tuple[nn.Module, int]]] = {
    **{name: partial(_gpen, config) for name, config in GPEN_VARIANTS.items()},
    **{name: partial(_gfpgan, config) for name, config in GFPGAN_VARIANTS.items()},
    "codeformer": _codeformer,
}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="gfpgan-v1.4", help=f"comma-separated, of: {', '.join(RESTORERS)}")
    parser.add_argument("--batches", default="1,4", help="comma-separated batch sizes")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch threads")
    parser.add_argument("--repeats", type=int, default=2, help="timed runs per point (after one warm-up)")
    return parser.parse_args()


def time_forward(model: nn.Module, size_px: int, batch: int, repeats: int) -> tuple[float, float]:
    """Median wall seconds and median process CPU seconds for one forward pass of ``batch`` faces.

    CPU seconds stay meaningful on a shared machine, where wall time also counts other processes' load.
    """
    faces = torch.rand(batch, 3, size_px, size_px) * 2 - 1
    wall, cpu = [], []
    with torch.inference_mode():
        model(faces)
        for _ in range(repeats):
            start, start_cpu = time.perf_counter(), time.process_time()
            model(faces)
            wall.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
    return statistics.median(wall), statistics.median(cpu)


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    names = args.models.split(",")
    unknown = [name for name in names if name not in RESTORERS]
    if unknown:
        sys.exit(f"unknown models {unknown}; known: {', '.join(RESTORERS)}")
    batches = [int(b) for b in args.batches.split(",")]
    print(f"torch {torch.__version__}, {args.threads} threads, random weights (official architectures)")
    print(f"{'model':<16}{'size':>6}{'batch':>6}{'s/batch':>10}{'faces/s':>10}{'s/face':>9}{'cpu-s/face':>12}")
    for name in names:
        model, size_px = RESTORERS[name]()
        model.eval().requires_grad_(False)
        for batch in batches:
            wall, cpu = time_forward(model, size_px, batch, args.repeats)
            row = f"{name:<16}{size_px:>6}{batch:>6}{wall:>10.2f}{batch / wall:>10.2f}{wall / batch:>9.2f}"
            print(f"{row}{cpu / batch:>12.2f}", flush=True)
        del model


if __name__ == "__main__":
    main()
