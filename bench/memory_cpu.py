"""Peak memory of one forward pass per model and batch size, measured on the CPU (each point in a fresh process).

A stand-in for GPU sizing until ``bench/gpu_check.sh`` runs on a GPU: fp32 weights plus activations are what a CUDA
replica also holds (the CUDA context, ~0.5 GiB, and the allocator's caching come on top; bf16 halves activations).

    python bench/memory_cpu.py
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]

POINT = r"""
import json, resource, sys, torch
sys.path.insert(0, {root!r})
torch.set_num_threads(2)
kind, batch = {kind!r}, {batch}
if kind.startswith("gpen"):
    from deployments.restore.gpen import GPEN_VARIANTS, build_gpen
    config = GPEN_VARIANTS[kind]
    model = build_gpen(config).eval()
    x = torch.zeros(batch, 3, config.size, config.size)
    run = lambda: model(x)
else:
    import numpy as np
    from deployments.cartoon.dctnet import build_dctnet_from_constants, official_weight_shapes
    consts = {{k: np.zeros(s, np.float32) for k, s in official_weight_shapes().items()}}
    model = build_dctnet_from_constants(consts, eps=0.01)
    height, width = (288, 288) if kind == "dctnet-head" else (720, 1280)
    x = torch.zeros(batch, 3, height, width)
    run = lambda: model.forward_batch(x)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
with torch.inference_mode():
    run()
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
params = sum(p.numel() for p in (model.parameters() if hasattr(model, "parameters") else model.graph.parameters()))
print(json.dumps({{"weights_mib": params * 4 / 2**20, "forward_peak_mib": (after - before) / 1024}}))
"""


def measure(kind: str, batch: int) -> dict:
    code = POINT.format(root=str(REPO_ROOT), kind=kind, batch=batch)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    points = [
        ("gpen-bfr-512", 1),
        ("gpen-bfr-512", 2),
        ("gpen-bfr-256", 1),
        ("gpen-bfr-256", 4),
        ("dctnet-head", 1),
        ("dctnet-head", 8),
        ("dctnet-bg", 1),
        ("dctnet-bg", 2),
    ]
    print("| model | batch | weights MiB (fp32) | forward peak MiB above the loaded model |")
    print("|---|---|---|---|")
    for kind, batch in points:
        result = measure(kind, batch)
        print(f"| {kind} | {batch} | {result['weights_mib']:.0f} | {result['forward_peak_mib']:.0f} |", flush=True)
    print(f"\n(ru_maxrss of the process, {resource.getpagesize()} B pages; python bench/memory_cpu.py)")


if __name__ == "__main__":
    main()
