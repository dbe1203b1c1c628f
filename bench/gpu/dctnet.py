"""DCT-Net: device against CPU on one head, and images/s with TF32 off (as CartoonPredictor runs it)."""

from __future__ import annotations

import time
from functools import partial

import numpy as np
import torch

from bench.gpu.harness import Run, set_tf32, timed
from bench.gpu.report import REPORT
from deployments.cartoon.dctnet import build_dctnet_from_constants, official_weight_shapes


def dctnet_model(device: torch.device):
    rng = np.random.default_rng(0)
    consts = {k: (rng.standard_normal(s) * 0.05).astype(np.float32) for k, s in official_weight_shapes().items()}
    return build_dctnet_from_constants(consts, eps=0.01).to(device)


def dctnet_checks(run: Run, sizes: dict[str, tuple[int, int, list[int]]], repeats: int) -> None:
    set_tf32(False)  # as CartoonPredictor does: exactness against the float32 graph
    device = run.device
    start = time.perf_counter()
    cpu_model, gpu_model = dctnet_model(torch.device("cpu")), dctnet_model(device)
    gpu_model.forward_batch(torch.zeros(1, 3, 288, 288, device=device))
    run.sync()
    REPORT.model("dctnet").update({"first_forward_ms": (time.perf_counter() - start) * 1000})
    probe = np.random.default_rng(1).integers(0, 256, (288, 288, 3), np.uint8)
    diff = np.abs(cpu_model(probe).astype(int) - gpu_model(probe).astype(int))
    REPORT.table(
        f"DCT-Net {device.type} vs CPU on one 288 head (random official weights)",
        ["max diff", "values exact %", "values within 1 %"],
        [[int(diff.max()), float((diff == 0).mean() * 100), float((diff <= 1).mean() * 100)]],
    )
    rows = []
    for label, (height, width, batches) in sizes.items():
        for batch in batches:
            x = torch.rand(batch, 3, height, width, device=device) * 255
            run.reset_peak()
            seconds = timed(partial(gpu_model.forward_batch, x), repeats=repeats, device=device)
            rows.append([label, batch, seconds * 1000, batch / seconds, run.peak_mib()])
    REPORT.table(
        "DCT-Net images/s (model only, TF32 off)", ["input", "batch", "ms/batch", "images/s", "peak MiB"], rows
    )
    set_tf32(True)
    run.release()
