"""The three MTCNN networks on the device: crops/s of R-Net and O-Net, pyramid levels/s of P-Net."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from bench.gpu.harness import AMP_DTYPES, LAYOUTS, LOADS, Run, Sweep, autocast, precision_table
from deployments.faces.mtcnn import ONET_INPUT_PX, RNET_INPUT_PX, WEIGHT_FILES, Mtcnn, ONet, PNet, RNet


def check_mtcnn(run: Run, *, share_s: float) -> None:
    """The three MTCNN networks on the device (the cascade itself runs on CPU replicas): R-Net and O-Net crops/s,
    P-Net on one 1152x648 pyramid level (a 1080p photo at the 20 px face scale)."""

    def write(folder: Path) -> None:
        folder.mkdir()
        for net, name in ((PNet(), "pnet"), (RNet(), "rnet"), (ONet(), "onet")):
            torch.save(net.state_dict(), folder / WEIGHT_FILES[name])

    def read(folder: Path) -> nn.ModuleDict:
        loaded = Mtcnn(folder)
        return nn.ModuleDict({"pnet": loaded.pnet, "rnet": loaded.rnet, "onet": loaded.onet})

    def first_forward(nets: nn.ModuleDict) -> None:
        with torch.inference_mode():
            nets["onet"](torch.zeros(1, 3, ONET_INPUT_PX, ONET_INPUT_PX, device=run.device))

    nets = LOADS.load(run, "mtcnn", write, read, first_forward)
    generator = torch.Generator().manual_seed(0)
    level_hw = (64, 96) if run.quick else (648, 1152)
    cases = {
        "mtcnn r-net": (nets["rnet"], RNET_INPUT_PX, RNET_INPUT_PX, run.batches + ([] if run.quick else [512])),
        "mtcnn o-net": (nets["onet"], ONET_INPUT_PX, ONET_INPUT_PX, run.batches + ([] if run.quick else [512])),
        "mtcnn p-net": (nets["pnet"], *level_hw, [1, 2] if run.quick else [1, 2, 4]),
    }
    for key, (net, height, width, batches) in cases.items():
        pool = (torch.rand(max(batches), 3, height, width, generator=generator) * 2 - 1).to(run.device)
        precision_table(
            run,
            key,
            f"{key}: face probability differences (random weights, batch 2)",
            lambda net=net, pool=pool: net(pool[:2])[0],
        )

        def make_call(precision: str, layout: str, batch: int, net=net, pool=pool) -> Callable[[], object]:
            def call() -> object:
                with torch.inference_mode(), autocast(run.device, AMP_DTYPES[precision]):
                    return net(pool[:batch].contiguous(memory_format=LAYOUTS[layout]))[0].float().cpu()

            return call

        sweep = Sweep(run, key, "crops/s" if key != "mtcnn p-net" else "levels/s", make_call)
        layout = "NHWC" if key == "mtcnn p-net" else "NCHW"  # as Mtcnn runs them
        sweep.measure(layout, batches, share_s=share_s / 3, repeats=1 if run.quick else 5)
        sweep.report(f"{key} {sweep.unit} ({width}x{height} inputs, network and the probabilities back on the host)")
