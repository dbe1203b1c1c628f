"""Face restorers: GPEN, GFPGAN and CodeFormer, each loaded, compared across precisions and swept for faces/s."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import torch
from torch import nn

from bench.gpu.harness import ASTRONAUT_POINTS, LOADS, Run, Sweep, astronaut, precision_table, save_wrapped, to_layout
from bench.gpu.report import REPORT
from deployments.faces.align import align_face
from deployments.restore.codeformer import CodeFormerConfig, build_codeformer, load_codeformer
from deployments.restore.gfpgan import GfpganConfig, build_gfpgan, load_gfpgan
from deployments.restore.gpen import GpenConfig, build_gpen, load_gpen
from deployments.restore.inference import faces_to_tensor, restore_batch, tensor_to_faces

CODEFORMER_FIDELITY = 0.5
QUICK_GPEN = GpenConfig(size=64, style_dim=64, n_mlp=2, narrow=0.25)
QUICK_GFPGAN = GfpganConfig(out_size=64, num_style_feat=32, num_mlp=2, channel_multiplier=1, narrow=1 / 16)
QUICK_CODEFORMER = CodeFormerConfig(
    size_px=64,
    base_channels=32,
    channel_mults=(1, 1, 2),
    res_blocks=1,
    attn_resolutions=(16,),
    codebook_size=64,
    code_dim=32,
    embed_dim=32,
    n_head=2,
    n_layers=1,
    connect_resolutions=(32, 64),
)


@dataclass(frozen=True)
class Restorer:
    """How one restorer is written, loaded and called (as ``RestorationPredictor`` calls it) and deployed."""

    key: str
    size_px: int
    template: str
    write: Callable[[Path], None]
    read: Callable[[Path], nn.Module]
    layout: str  # configs/gpu.yaml's channels_last
    fidelity: float | None = None  # CodeFormer's w
    round_output: bool = False
    seeded_noise: bool = False  # GFPGAN draws noise every forward: compare passes with one seeded generator

    def forward(self, model: nn.Module, batch: torch.Tensor) -> torch.Tensor:
        if self.fidelity is not None:
            return model(batch, torch.full((batch.shape[0],), self.fidelity))
        if self.seeded_noise:
            return model(batch, generator=torch.Generator(batch.device).manual_seed(0))
        return model(batch)

    def restore(self, run: Run, model: nn.Module, crops: list[np.ndarray], precision: str, layout: str) -> list:
        return restore_batch(
            model,
            crops,
            size_px=self.size_px,
            fidelities=[self.fidelity] * len(crops) if self.fidelity is not None else None,
            round_output=self.round_output,
            device=run.device,
            autocast_dtype="bfloat16" if precision == "bf16" else None,
            channels_last=layout == "NHWC",
        )

    def first_forward(self, run: Run, model: nn.Module) -> None:
        self.restore(run, model, [np.zeros((self.size_px, self.size_px, 3), np.uint8)], "fp32", "NCHW")


def gpen_template(size_px: int) -> str:
    """GPEN's alignment template; a quick run's tiny GPEN takes 256 px crops, resized by ``restore_batch``."""
    return f"gpen-{size_px}" if size_px in (256, 512, 1024) else "gpen-256"


def gpen_restorer(name: str, config: GpenConfig) -> Restorer:
    return Restorer(
        key=name,
        size_px=config.size,
        template=gpen_template(config.size),
        write=lambda path: torch.save(build_gpen(config).state_dict(), path),  # GPEN ships a flat state dict
        read=lambda path: load_gpen(path, config=config),
        layout="NHWC",
    )


def gfpgan_restorer(config: GfpganConfig) -> Restorer:
    return Restorer(
        key="gfpgan-v1.4",
        size_px=config.out_size,
        template="ffhq-512",
        write=partial(save_wrapped, partial(build_gfpgan, config)),
        read=lambda path: load_gfpgan(path, config=config),
        layout="NHWC",
        round_output=True,
        seeded_noise=True,
    )


def codeformer_restorer(config: CodeFormerConfig) -> Restorer:
    return Restorer(
        key="codeformer",
        size_px=config.size_px,
        template="ffhq-512",
        write=partial(save_wrapped, partial(build_codeformer, config)),
        read=lambda path: load_codeformer(path, config=config),
        layout="NCHW",
        fidelity=CODEFORMER_FIDELITY,
        round_output=True,
    )


def check_restorer(run: Run, restorer: Restorer, *, share_s: float, other_layout_batch: int = 32) -> nn.Module:
    """Load, precision differences on two aligned faces, faces/s (pre- and post-processing included)."""
    key = restorer.key
    model = LOADS.load(run, key, restorer.write, restorer.read, partial(restorer.first_forward, run))
    face = align_face(astronaut(), ASTRONAUT_POINTS, restorer.template).crop
    faces = [face, np.ascontiguousarray(face[:, ::-1])]
    batch = faces_to_tensor(faces, restorer.size_px).to(run.device)
    codes: list[torch.Tensor] = []
    hook = None
    if restorer.fidelity is not None:  # CodeFormer: which codebook entries each pass picks
        hook = model.idx_pred_layer.register_forward_hook(lambda _m, _i, out: codes.append(out.argmax(dim=2).cpu()))
    try:
        passes = precision_table(
            run,
            key,
            f"{key}: output differences on two aligned faces (random official weights, batch 2)",
            lambda: restorer.forward(model, batch),
            to_uint8=lambda out: np.stack(tensor_to_faces(out, round_output=restorer.round_output)),
        )
    finally:
        if hook is not None:
            hook.remove()
    if codes:
        rows = [[label, float((chosen == codes[0]).float().mean() * 100)] for label, chosen in zip(passes, codes)]
        REPORT.table(f"{key}: codebook entries equal to strict fp32's", ["pass", "codes equal %"], rows[1:])
    return throughput(run, restorer, model, share_s=share_s, other_layout_batch=other_layout_batch)


def throughput(run: Run, restorer: Restorer, model: nn.Module, *, share_s: float, other_layout_batch: int) -> nn.Module:
    rng = np.random.default_rng(0)
    size = restorer.size_px
    pool = [rng.integers(0, 256, (size, size, 3), np.uint8) for _ in range(max(run.batches))]

    def make_call(precision: str, layout: str, batch: int) -> Callable[[], object]:
        net = to_layout(model, layout)
        return partial(restorer.restore, run, net, pool[:batch], precision, layout)

    sweep = Sweep(run, restorer.key, "faces/s", make_call)
    sweep.measure(restorer.layout, run.batches, share_s=share_s * 0.85)
    other = "NCHW" if restorer.layout == "NHWC" else "NHWC"
    sweep.measure(other, [min(other_layout_batch, max(run.batches))], share_s=share_s * 0.15)
    sweep.report(f"{restorer.key} faces/s (pre/post-processing included), deployed layout {restorer.layout}")
    return to_layout(model, restorer.layout)


def check_gpen(run: Run, name: str, config: GpenConfig, *, share_s: float, cpu_reference: bool) -> nn.Module:
    """GPEN as before the new models (device vs CPU on top of the precision table), and its faces/s."""
    restorer = gpen_restorer(name, config)
    model = LOADS.load(run, name, restorer.write, restorer.read, partial(restorer.first_forward, run))
    x = torch.rand(2, 3, config.size, config.size, generator=torch.Generator().manual_seed(0)) * 2 - 1
    reference = None
    if cpu_reference:
        with torch.inference_mode():
            reference = model.cpu()(x)
        model = model.to(run.device)
    precision_table(
        run,
        name,
        f"{name}: {run.device.type} vs CPU, TF32 and bf16 vs strict fp32 (random official weights, batch 2)",
        lambda: model(x.to(run.device)),
        to_uint8=lambda out: np.stack(tensor_to_faces(out)),
        cpu_reference=reference,
    )
    return throughput(run, restorer, model, share_s=share_s, other_layout_batch=32)
