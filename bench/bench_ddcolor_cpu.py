"""CPU time of DDColor's forward pass at the official 512², tiny and large, random weights (the released files' FLOPs).

Prints wall and process-CPU seconds per photo (median of ``--repeats`` after one warm-up) and the peak RSS growth.

    .venv/bin/python bench/bench_ddcolor_cpu.py --variants tiny,large --threads 2 --repeats 2
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from deployments.colorize.ddcolor import build_ddcolor  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default="tiny", help="comma-separated: tiny, large")
    parser.add_argument("--size", type=int, default=512, help="input side (a multiple of 32)")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} threads, {args.size}², batch {args.batch}")
    print("| variant | parameters | wall s/photo | CPU s/photo | peak RSS MiB |")
    print("|---|---|---|---|---|")
    for variant in args.variants.split(","):
        model = build_ddcolor(variant).eval()
        x = torch.rand(args.batch, 3, args.size, args.size)
        wall, cpu = [], []
        with torch.inference_mode():
            model(x)
            for _ in range(args.repeats):
                start_wall, start_cpu = time.perf_counter(), time.process_time()
                model(x)
                wall.append((time.perf_counter() - start_wall) / args.batch)
                cpu.append((time.process_time() - start_cpu) / args.batch)
        peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        parameters = sum(p.numel() for p in model.parameters())
        print(
            f"| {variant} | {parameters / 1e6:.1f} M | {statistics.median(wall):.2f} | {statistics.median(cpu):.2f} "
            f"| {peak_mib:.0f} |",
            flush=True,
        )
        del model


if __name__ == "__main__":
    main()
