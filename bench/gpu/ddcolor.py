"""DDColor tiny and large: load, bf16 against fp32 on real colour output, photos/s and peak memory at batch 1…32."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

import cv2
import numpy as np
import torch
from torch import nn

from bench.gpu.harness import AMP_DTYPES, LAYOUTS, LOADS, Run, Sweep, astronaut, autocast, precision_table, to_layout
from deployments.colorize.ddcolor import build_ddcolor, load_ddcolor
from deployments.colorize.pipeline import DEFAULT_SIZE_PX, gray_input, join_color

QUICK_SIZE_PX = 64
MAX_BATCH = 32  # a Colorizer batch (configs/gpu.yaml) stays well below this


def save_params(variant: str, path: Path) -> None:
    """The released layout: random weights of ``variant`` under ``params``."""
    torch.save({"params": build_ddcolor(variant).state_dict()}, path)


def check_ddcolor(run: Run, variant: str, *, share_s: float) -> None:
    """``variant`` at the official 512² (64² when quick): the network on prepared inputs, ``ab`` back on the host."""
    size_px = QUICK_SIZE_PX if run.quick else DEFAULT_SIZE_PX
    key = f"ddcolor-{variant}"
    model = LOADS.load(
        run,
        key,
        partial(save_params, variant),
        load_ddcolor,
        lambda m: m(torch.zeros(1, 3, size_px, size_px, device=run.device)),
    )
    photo = cv2.cvtColor(cv2.cvtColor(astronaut(), cv2.COLOR_RGB2GRAY), cv2.COLOR_GRAY2RGB)
    batches = [batch for batch in run.batches if batch <= MAX_BATCH]
    pool = torch.from_numpy(np.stack([gray_input(photo, size_px)] * max(batches))).to(run.device)

    def to_uint8(ab: torch.Tensor) -> np.ndarray:
        return np.stack([join_color(photo, item.numpy()) for item in ab])

    precision_table(
        run,
        key,
        f"{key}: output differences on two {size_px} px gray photos (random official weights), uint8 after Lab → RGB",
        lambda: model(pool[:2]),
        to_uint8=to_uint8,
    )

    def colorize(net: nn.Module, batch: torch.Tensor, precision: str) -> torch.Tensor:
        with torch.inference_mode(), autocast(run.device, AMP_DTYPES[precision]):
            return net(batch).float().cpu()

    def make_call(precision: str, layout: str, batch: int) -> Callable[[], object]:
        inputs = pool[:batch].contiguous(memory_format=LAYOUTS[layout])
        return partial(colorize, to_layout(model, layout), inputs, precision)

    sweep = Sweep(run, key, "photos/s", make_call)
    sweep.measure("NCHW", batches, share_s=share_s * 0.85)
    sweep.measure("NHWC", [min(8, max(batches))], share_s=share_s * 0.15)
    sweep.report(
        f"{key} photos/s at {size_px}² (network and the ab copy to the host; the Lab join at the photo's own size "
        "runs on the replica's CPU)"
    )
