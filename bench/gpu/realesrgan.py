"""Real-ESRGAN on background tiles as the BackgroundUpscaler cuts them from a 12 MP photo."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import cv2
import numpy as np
import torch
from torch import nn

from bench.gpu.harness import (
    AMP_DTYPES,
    LAYOUTS,
    LOADS,
    Run,
    Sweep,
    astronaut,
    autocast,
    precision_table,
    save_wrapped,
    to_layout,
)
from deployments.restore.pipeline import BG_OVERLAP_PX, BG_TILE_PX
from deployments.restore.realesrgan import (
    REALESRGAN_VARIANTS,
    RrdbConfig,
    build_realesrgan,
    load_realesrgan,
    output_to_rgb,
    rgb_to_input,
)
from deployments.restore.tiles import realesrgan_multiple_px, split_tiles

TWELVE_MP_HW = (3000, 4000)
QUICK_RRDB = {"num_feat": 16, "num_block": 2, "num_grow_ch": 8}


def check_realesrgan(run: Run, name: str, *, share_s: float) -> None:
    """Tiles of 400 + 2×10 px (the BackgroundUpscaler's) from a 12 MP photo, tiles/s as the engine runs them."""
    config = REALESRGAN_VARIANTS[name]
    if run.quick:
        config = RrdbConfig(scale=config.scale, **QUICK_RRDB)
    tile_px, overlap_px = (64, 10) if run.quick else (BG_TILE_PX, BG_OVERLAP_PX)
    window_px = tile_px + 2 * overlap_px
    model = LOADS.load(
        run,
        name,
        partial(save_wrapped, partial(build_realesrgan, config)),
        load_realesrgan,
        lambda m: m(torch.zeros(1, 3, window_px, window_px, device=run.device)),
    )
    height, width = (150, 200) if run.quick else TWELVE_MP_HW
    photo = cv2.resize(astronaut(), (width, height), interpolation=cv2.INTER_CUBIC)
    tiles = split_tiles(photo, tile_px=tile_px, overlap_px=overlap_px, multiple_px=realesrgan_multiple_px(config.scale))
    pool = np.stack([tiles[i % len(tiles)].pixels for i in range(max(run.batches))])

    def upscale(net: nn.Module, pixels: np.ndarray, precision: str, layout: str) -> np.ndarray:
        with torch.inference_mode(), autocast(run.device, AMP_DTYPES[precision]):
            batch = rgb_to_input(pixels, device=run.device).contiguous(memory_format=LAYOUTS[layout])
            return output_to_rgb(net(batch))

    precision_table(
        run,
        name,
        f"{name}: output differences on two {window_px} px tiles (random official weights)",
        lambda: model(rgb_to_input(pool[:2], device=run.device)),
        to_uint8=output_to_rgb,
    )

    def make_call(precision: str, layout: str, batch: int) -> Callable[[], object]:
        return partial(upscale, to_layout(model, layout), pool[:batch], precision, layout)

    sweep = Sweep(run, name, "tiles/s", make_call)
    sweep.measure("NCHW", run.batches, share_s=share_s * 0.85)
    sweep.measure("NHWC", [min(16, max(run.batches))], share_s=share_s * 0.15)
    sweep.report(
        f"{name} tiles/s, {window_px} px windows (pre/post-processing included; a {width}x{height} photo is "
        f"{len(tiles)} tiles: seconds per photo = {len(tiles)} / tiles/s)"
    )
