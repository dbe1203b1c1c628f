"""One-shot GPU check: correctness and timings for every model, in one call on a lent GPU machine.

Runs with only torch, numpy, opencv, pillow and scikit-image (what the GPU image has; no Ray, no pydantic): the pure
model and image code of ``deployments/``. Every model gets random weights in its official file layout (the same
FLOPs as the released files), is written to a temporary folder and read back through our own loader, so load times
are real. Per model: load and first forward; output difference of TF32 convolutions and bf16 autocast against strict
fp32; throughput and peak memory at batch 1…64 in fp32 and bf16 (a precision stops at the first OOM, or when the next
batch would overrun the model's share of the time budget). Prints markdown tables as it goes, rewrites
``gpu_report.json`` in ``--out`` after each table, and ends with a summary table and one ``SUMMARY_JSON`` line.

    python3 bench/gpu_check.py --out "$OUT"             # on the GPU machine (bench/gpu_check.sh)
    python3 bench/gpu_check.py --device cpu --quick     # smoke test anywhere: tiny models, batches 1 and 2

"fp32" in the throughput tables is torch's default (cuDNN may use TF32), as a replica runs; "strict" turns TF32 off.
Layouts are those ``configs/gpu.yaml`` deploys (channels-last for GPEN, GFPGAN and MODNet), plus the other layout at
one batch size to show whether that choice is right.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import cv2
import numpy as np
import torch
from torch import nn

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from deployments.cartoon.dctnet import build_dctnet_from_constants, official_weight_shapes  # noqa: E402
from deployments.common.image import decode_image, encode_image  # noqa: E402
from deployments.common.torch_device import to_memory_format  # noqa: E402
from deployments.faces.align import align_face, rescale_crop_matrix  # noqa: E402
from deployments.faces.mtcnn import ONET_INPUT_PX, RNET_INPUT_PX, WEIGHT_FILES, Mtcnn, ONet, PNet, RNet  # noqa: E402
from deployments.faces.paste import paste_back  # noqa: E402
from deployments.idphoto import modnet as modnet_arch  # noqa: E402
from deployments.idphoto.modnet import ModNet, load_modnet, prepare_input  # noqa: E402
from deployments.restore.codeformer import CODEFORMER_512, CodeFormerConfig, build_codeformer, load_codeformer  # noqa: E402
from deployments.restore.engine import faces_to_tensor, restore_batch, tensor_to_faces  # noqa: E402
from deployments.restore.gfpgan import GfpganConfig, build_gfpgan, load_gfpgan  # noqa: E402
from deployments.restore.gpen import GPEN_VARIANTS, GpenConfig, build_gpen, load_gpen  # noqa: E402
from deployments.restore.realesrgan import (  # noqa: E402
    REALESRGAN_VARIANTS,
    RrdbConfig,
    build_realesrgan,
    load_realesrgan,
    output_to_rgb,
    rgb_to_input,
)
from deployments.restore.tiles import realesrgan_multiple_px, split_tiles  # noqa: E402
from tests.tf_graph import field_bytes, field_varint  # noqa: E402

# Landmarks of the astronaut (skimage) face, so the whole-photo run needs no face detector on the GPU machine.
ASTRONAUT_POINTS = np.array([[204, 101], [247, 104], [226, 128], [209, 149], [242, 151]], dtype=np.float64)
# Background tiles as serve_app/jobs/restore.py cuts them (BG_TILE_PX, BG_OVERLAP_PX; not imported: it needs Ray).
BG_TILE_PX, BG_OVERLAP_PX = 400, 10
TWELVE_MP_HW = (3000, 4000)
ID_PHOTO_HW = (4000, 3000)  # a 12 MP phone portrait: MODNet sees it at 672x512
BATCHES = [1, 2, 4, 8, 16, 32, 64]
AMP_DTYPES = {"fp32": None, "bf16": torch.bfloat16}
LAYOUTS = {"NCHW": torch.contiguous_format, "NHWC": torch.channels_last}
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
QUICK_RRDB = {"num_feat": 16, "num_block": 2, "num_grow_ch": 8}
ONNX_FLOAT = 1


# --------------------------------------------------------------------------------------------------------------------
# Report, clock and timing


class Report:
    """Tables in the order they were printed, a per-model summary, and the JSON file rewritten after each table
    (so a run cut short by its timeout still leaves what it measured)."""

    def __init__(self) -> None:
        self.path: Path | None = None
        self.data: dict = {"summary": {}}

    def model(self, key: str) -> dict:
        return self.data["summary"].setdefault(key, {})

    def table(self, title: str, header: list[str], rows: list[list]) -> None:
        print(f"\n### {title}\n")
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for row in rows:
            print("| " + " | ".join(_cell(v) for v in row) + " |", flush=True)
        self.data[title] = [dict(zip(header, row)) for row in rows]
        self.save()

    def save(self) -> None:
        if self.path is not None:
            self.path.write_text(json.dumps(self.data, indent=2, default=float), encoding="utf-8")


def _cell(value: object) -> str:
    if isinstance(value, float):
        return "—" if math.isnan(value) else f"{value:.4g}"
    return str(value)


REPORT = Report()


class Clock:
    """The run's time budget: each section gets a share, and none starts what would end past the whole budget."""

    def __init__(self, total_s: float) -> None:
        self.end = time.perf_counter() + total_s

    def left_s(self) -> float:
        return self.end - time.perf_counter()

    def deadline(self, share_s: float) -> float:
        return min(self.end, time.perf_counter() + share_s)


@dataclass(frozen=True)
class Run:
    """What every check needs: the device, the clock, small models and batches (``quick``), a scratch folder."""

    device: torch.device
    clock: Clock
    quick: bool
    tmp: Path
    models_dir: Path

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def precisions(self) -> tuple[str, ...]:
        """bf16 only on CUDA: ``restore_batch`` and the matter ignore autocast elsewhere."""
        return ("fp32", "bf16") if self.cuda else ("fp32",)

    @property
    def batches(self) -> list[int]:
        return [1, 2] if self.quick else BATCHES

    @property
    def repeats(self) -> int:
        return 1 if self.quick else 3

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def reset_peak(self) -> None:
        if self.cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()

    def peak_mib(self) -> float:
        return torch.cuda.max_memory_allocated() / 2**20 if self.cuda else float("nan")

    def release(self) -> None:
        """After a model's section: its memory back, so the next model's peaks are its own."""
        if self.cuda:
            torch.cuda.empty_cache()


def to_layout(model: nn.Module, layout: str) -> nn.Module:
    return to_memory_format(model, LAYOUTS[layout])


def set_tf32(enabled: bool) -> None:
    """cuDNN TF32 convolutions: on is torch's default (what a restorer replica runs); off for strict fp32 and for
    DCT-Net, whose engine turns it off. Matmuls stay strict fp32 throughout (torch's default)."""
    torch.backends.cudnn.allow_tf32 = enabled
    torch.backends.cuda.matmul.allow_tf32 = False


def autocast(device: torch.device, dtype: torch.dtype | None) -> contextlib.AbstractContextManager:
    return torch.autocast(device.type, dtype=dtype) if dtype is not None else contextlib.nullcontext()


def timed(fn: Callable[[], object], *, repeats: int, device: torch.device) -> float:
    """Median seconds of ``fn()`` after two warm-up calls."""
    for _ in range(2):
        fn()
    _sync(device)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        _sync(device)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


# A throughput point: (precision, layout, batch) -> a call that processes one batch, inputs already prepared.
MakeCall = Callable[[str, str, int], Callable[[], object]]


@dataclass
class Sweep:
    """One throughput table: every precision × layout × batch of ``make_call``, timed, with the peak memory."""

    run: Run
    key: str
    unit: str
    make_call: MakeCall
    rows: list[list] = field(default_factory=list)

    def measure(self, layout: str, batches: list[int], *, share_s: float, repeats: int | None = None) -> None:
        """A precision's batches stop at an OOM (reported) or when the next one would pass its deadline: each
        precision gets an equal part of ``share_s`` (so a slow fp32 sweep leaves bf16 its time)."""
        run, repeats = self.run, repeats or self.run.repeats
        for precision in run.precisions:
            deadline = run.clock.deadline(share_s / len(run.precisions))
            previous: tuple[int, float] | None = None
            for batch in batches:
                projected_s = 0.0 if previous is None else previous[1] * batch / previous[0] * (2 + repeats)
                if not run.quick and time.perf_counter() + projected_s > deadline:  # a smoke test runs every point
                    self.rows.append([precision, layout, batch, math.nan, math.nan, math.nan, "skipped: time"])
                    break
                run.reset_peak()
                failure = None
                try:
                    seconds = timed(self.make_call(precision, layout, batch), repeats=repeats, device=run.device)
                except RuntimeError as exc:  # OOM, or a kernel's size limit (int32 indexing): larger batches fail too
                    failure = "OOM" if isinstance(exc, torch.cuda.OutOfMemoryError) else f"error: {str(exc)[:100]}"
                if failure is not None:
                    run.release()
                    self.rows.append([precision, layout, batch, math.nan, math.nan, math.nan, failure])
                    REPORT.model(self.key).setdefault("failed_at_batch", {})[f"{precision} {layout}"] = failure, batch
                    break
                self.rows.append([precision, layout, batch, seconds * 1000, batch / seconds, run.peak_mib(), "ok"])
                previous = (batch, seconds)

    def report(self, title: str) -> None:
        header = ["precision", "layout", "batch", "ms/batch", self.unit, "peak MiB", "note"]
        REPORT.table(title, header, self.rows)
        summary = REPORT.model(self.key)
        summary["unit"] = self.unit
        for precision in self.run.precisions:
            done = [row for row in self.rows if row[0] == precision and row[6] == "ok"]
            if not done:
                continue
            best = max(done, key=lambda row: row[4])
            at_32 = [row for row in done if row[2] == 32 and row[1] == best[1]]
            summary[precision] = {
                "best_per_s": best[4],
                "at_batch": best[2],
                "layout": best[1],
                "peak_mib_at_best": best[5],
                "peak_mib_at_32": at_32[0][5] if at_32 else math.nan,
            }
        self.run.release()


def precision_table(
    run: Run,
    key: str,
    title: str,
    forward: Callable[[], torch.Tensor],
    *,
    to_uint8: Callable[[torch.Tensor], np.ndarray] | None = None,
    cpu_reference: torch.Tensor | None = None,
) -> list[str]:
    """Outputs of TF32 convolutions (CUDA only) and bf16 autocast against strict fp32 on the same device, in the
    output's own units and, with ``to_uint8``, in 8-bit levels after the model's post-processing. Returns the labels
    of the forward passes in the order they ran (for callers that record something per pass)."""
    passes = {"strict fp32": (False, None)}
    if run.cuda:
        passes["fp32, TF32 convs"] = (True, None)
    passes["bf16 autocast"] = (True, torch.bfloat16)
    outputs = {}
    with torch.inference_mode():
        for label, (tf32, dtype) in passes.items():
            set_tf32(tf32)
            with autocast(run.device, dtype):
                outputs[label] = forward().float().cpu()
    set_tf32(True)
    reference = outputs["strict fp32"]
    rows = []
    if cpu_reference is not None:
        rows.append(
            [f"strict fp32 on {run.device.type} vs CPU fp32", *_differences(reference, cpu_reference, to_uint8)]
        )
    for label, output in outputs.items():
        if label != "strict fp32":
            rows.append([f"{label} vs strict fp32", *_differences(output, reference, to_uint8)])
    header = ["comparison", "max abs", "mean abs", "uint8 max levels", "uint8 equal %"]
    REPORT.table(title, header, rows)
    bf16 = rows[-1]
    REPORT.model(key)["bf16_vs_fp32"] = {"max_abs": bf16[1], "mean_abs": bf16[2], "uint8_max_levels": bf16[3]}
    return list(passes)


def _differences(
    output: torch.Tensor, reference: torch.Tensor, to_uint8: Callable[[torch.Tensor], np.ndarray] | None
) -> list[float]:
    diff = (output - reference).abs()
    if to_uint8 is None:
        return [float(diff.max()), float(diff.mean()), math.nan, math.nan]
    with torch.inference_mode():  # post-processing may work in place on these inference tensors
        levels = np.abs(to_uint8(output).astype(np.int16) - to_uint8(reference).astype(np.int16))
    return [float(diff.max()), float(diff.mean()), float(levels.max()), float((levels == 0).mean() * 100)]


@dataclass
class Loads:
    """Model load (our loader, from a file just written: page cache warm) and load + first forward on the device."""

    rows: list[list] = field(default_factory=list)

    def load(
        self,
        run: Run,
        key: str,
        write: Callable[[Path], None],
        read: Callable[[Path], nn.Module],
        first_forward: Callable[[nn.Module], object],
    ) -> nn.Module:
        path = run.tmp / key
        write(path)
        size_mib = sum(p.stat().st_size for p in ([path] if path.is_file() else path.iterdir())) / 2**20
        start = time.perf_counter()
        model = read(path)
        loaded_s = time.perf_counter() - start
        model = model.to(run.device)
        with torch.inference_mode():
            first_forward(model)
        run.sync()
        total_s = time.perf_counter() - start
        self.rows.append([key, size_mib, loaded_s * 1000, total_s * 1000])
        REPORT.model(key).update({"file_mib": size_mib, "load_ms": loaded_s * 1000, "first_forward_ms": total_s * 1000})
        return model

    def report(self) -> None:
        REPORT.table(
            "Model load (our loader, random weights in the official file layout) and first forward",
            ["model", "file MiB", "load ms", "load + to device + first forward ms"],
            self.rows,
        )


LOADS = Loads()


def save_wrapped(build: Callable[[], nn.Module], path: Path) -> None:
    """The released BasicSR layout (GFPGAN, CodeFormer, Real-ESRGAN): the weights under ``params_ema``."""
    torch.save({"params_ema": build().state_dict()}, path)


def astronaut() -> np.ndarray:
    from skimage import data as skdata

    return np.ascontiguousarray(skdata.astronaut())


# --------------------------------------------------------------------------------------------------------------------
# Face restorers: GPEN, GFPGAN, CodeFormer


@dataclass(frozen=True)
class Restorer:
    """How one restorer is written, loaded and called (as ``FaceRestorerEngine`` calls it) and deployed."""

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


# --------------------------------------------------------------------------------------------------------------------
# Real-ESRGAN background tiles


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


# --------------------------------------------------------------------------------------------------------------------
# MODNet


def write_modnet_onnx(path: Path, seed: int = 0) -> None:
    """A MODNet ``.onnx`` in the official export's layout, random weights: the backbone's convolutions unnamed in
    forward order (BatchNorm folded), every branch convolution under its module path with IBNorm's BatchNorm half
    beside it, nine Resize nodes with their scales, the squeeze-excite MatMuls. ``load_modnet`` reads it as the
    released file."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = ModNet()
    state = {key: value.numpy() for key, value in model.state_dict().items()}
    initializers: dict[str, np.ndarray] = {}
    nodes: list[tuple[str, tuple[str, ...]]] = []
    encoder_convs = [
        name for name, m in model.named_modules() if name.startswith("encoder") and isinstance(m, nn.Conv2d)
    ]
    for index, name in enumerate(encoder_convs):
        weight, bias = f"{1000 + 2 * index}", f"{1001 + 2 * index}"
        initializers[weight], initializers[bias] = state[f"{name}.weight"], state[f"{name}.bias"]
        nodes.append(("Conv", ("x", weight, bias)))
    for index, scale in enumerate(modnet_arch._RESIZE_SCALES):
        initializers[f"scales.{index}"] = np.array([1.0, 1.0, scale, scale], np.float32)
        nodes.append(("Resize", ("x", "", f"scales.{index}")))
    initializers["se.squeeze"], initializers["se.excite"] = state["se.fc1.weight"].T, state["se.fc2.weight"].T
    nodes += [("MatMul", ("x", "se.squeeze")), ("MatMul", ("x", "se.excite"))]
    for prefix, ours in modnet_arch.BRANCH_LAYERS.items():
        layer = model.get_submodule(ours)
        weight, bias = f"{prefix}.layers.0.weight", f"{prefix}.layers.0.bias"
        initializers[weight], initializers[bias] = state[f"{ours}.conv.weight"], state[f"{ours}.conv.bias"]
        nodes.append(("Conv", ("x", weight, bias)))
        channels = layer.batchnorm_channels
        if channels < layer.conv.out_channels:
            norm = f"{prefix}.layers.1.bnorm"
            initializers[f"{norm}.weight"] = 1.0 + 0.1 * rng.standard_normal(channels, dtype=np.float32)
            initializers[f"{norm}.bias"] = 0.1 * rng.standard_normal(channels, dtype=np.float32)
            initializers[f"{norm}.running_mean"] = 0.1 * rng.standard_normal(channels, dtype=np.float32)
            initializers[f"{norm}.running_var"] = rng.uniform(0.5, 1.5, channels).astype(np.float32)
            statistics_in = tuple(f"{norm}.{k}" for k in ("weight", "bias", "running_mean", "running_var"))
            nodes.append(("BatchNormalization", ("x", *statistics_in)))
    graph = b"".join(
        field_bytes(
            1, b"".join(field_bytes(1, i.encode()) for i in inputs) + field_bytes(2, b"y") + field_bytes(4, op.encode())
        )
        for op, inputs in nodes
    )
    for name, array in initializers.items():
        tensor = b"".join(field_varint(1, dim) for dim in array.shape) + field_varint(2, ONNX_FLOAT)
        tensor += field_bytes(8, name.encode()) + field_bytes(9, np.ascontiguousarray(array, dtype="<f4").tobytes())
        graph += field_bytes(5, tensor)
    path.write_bytes(field_varint(1, 7) + field_bytes(7, graph))


def check_modnet(run: Run, *, share_s: float) -> None:
    """MODNet as the matter runs it on a GPU: a 12 MP portrait prepared at the 512 px reference (672x512 input),
    channels-last; images/s of the network with transfers, plus the CPU-side preparation once."""
    reference_px = 128 if run.quick else modnet_arch.REFERENCE_SIZE_PX
    height, width = ID_PHOTO_HW
    photo = cv2.resize(astronaut(), (width // 10, height // 10) if run.quick else (width, height))
    start = time.perf_counter()
    prepared = prepare_input(photo, reference_px)
    prepare_ms = (time.perf_counter() - start) * 1000
    input_h, input_w = prepared.size_hw

    def first_forward(model: nn.Module) -> None:
        model(torch.zeros(1, 3, input_h, input_w, device=run.device))

    model = LOADS.load(run, "modnet", write_modnet_onnx, load_modnet, first_forward)
    model = model.to(memory_format=torch.channels_last)
    two = torch.from_numpy(np.stack([prepared.tensor, prepared.tensor[:, :, ::-1].copy()])).to(run.device)
    precision_table(
        run,
        "modnet",
        f"MODNet: matte differences on a {input_w}x{input_h} input and its mirror (random official weights)",
        lambda: model(two.contiguous(memory_format=torch.channels_last)),
        to_uint8=_matte_levels,
    )
    official = run.models_dir / "modnet" / "modnet_photographic_portrait_matting.onnx"
    if official.is_file():
        released = load_modnet(official).to(run.device, memory_format=torch.channels_last)
        precision_table(
            run,
            "modnet (released weights)",
            f"MODNet, released weights ({official.name}): the same differences",
            lambda: released(two.contiguous(memory_format=torch.channels_last)),
            to_uint8=_matte_levels,
        )
        del released
    stacked = np.stack([prepared.tensor] * max(run.batches))

    def matte(net: nn.Module, tensors: np.ndarray, precision: str, layout: str) -> np.ndarray:
        batch = torch.from_numpy(tensors).to(run.device).contiguous(memory_format=LAYOUTS[layout])
        with torch.inference_mode(), autocast(run.device, AMP_DTYPES[precision]):
            return net(batch)[:, 0].float().cpu().numpy()

    def make_call(precision: str, layout: str, batch: int) -> Callable[[], object]:
        return partial(matte, to_layout(model, layout), stacked[:batch], precision, layout)

    sweep = Sweep(run, "modnet", "images/s", make_call)
    sweep.measure("NHWC", run.batches, share_s=share_s * 0.85, repeats=1 if run.quick else 5)
    sweep.measure("NCHW", [min(16, max(run.batches))], share_s=share_s * 0.15)
    sweep.report(
        f"MODNet images/s at {input_w}x{input_h} (network and transfers; prepare_input of the "
        f"{photo.shape[1]}x{photo.shape[0]} photo on the CPU took {prepare_ms:.0f} ms, not included)"
    )


def _matte_levels(matte: torch.Tensor) -> np.ndarray:
    return np.round(matte.float().cpu().numpy() * 255.0).astype(np.uint8)


# --------------------------------------------------------------------------------------------------------------------
# MTCNN


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


# --------------------------------------------------------------------------------------------------------------------
# DCT-Net and the whole-photo GPEN run (as before)


def dctnet_model(device: torch.device):
    rng = np.random.default_rng(0)
    consts = {k: (rng.standard_normal(s) * 0.05).astype(np.float32) for k, s in official_weight_shapes().items()}
    return build_dctnet_from_constants(consts, eps=0.01).to(device)


def dctnet_checks(run: Run, sizes: dict[str, tuple[int, int, list[int]]], repeats: int) -> None:
    set_tf32(False)  # as CartoonEngine does: exactness against the float32 graph
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


class MicroBatcher:
    """What ``@serve.batch`` does for the restorer, in-process: gather crops for up to ``wait_s``, one forward."""

    def __init__(self, model, device: torch.device, max_batch: int, wait_s: float, autocast: str | None) -> None:
        self.model, self.device, self.max_batch, self.wait_s, self.autocast = model, device, max_batch, wait_s, autocast
        self.queue: asyncio.Queue = asyncio.Queue()

    async def restore(self, crop: np.ndarray) -> np.ndarray:
        future = asyncio.get_running_loop().create_future()
        await self.queue.put((crop, future))
        return await future

    async def run(self) -> None:
        while True:
            items = [await self.queue.get()]
            deadline = time.perf_counter() + self.wait_s
            while len(items) < self.max_batch and (left := deadline - time.perf_counter()) > 0:
                try:
                    items.append(await asyncio.wait_for(self.queue.get(), left))
                except asyncio.TimeoutError:
                    break
            crops = [crop for crop, _ in items]
            faces = await asyncio.to_thread(
                restore_batch,
                self.model,
                crops,
                size_px=self.model.config.size,
                device=self.device,
                autocast_dtype=self.autocast,
                channels_last=self.device.type == "cuda",
            )
            for (_, future), face in zip(items, faces):
                future.set_result(face)


async def whole_photo(data: bytes, batcher: MicroBatcher, size: int) -> float:
    start = time.perf_counter()
    image = await asyncio.to_thread(decode_image, data)
    points = [ASTRONAUT_POINTS, ASTRONAUT_POINTS + [512, 0]]
    aligned = [await asyncio.to_thread(align_face, image.rgb, p, gpen_template(size)) for p in points]
    restored = await asyncio.gather(*(batcher.restore(a.crop) for a in aligned))
    pasted = [(r, rescale_crop_matrix(a.matrix, a.crop.shape[0], r.shape[0])) for a, r in zip(aligned, restored)]
    result = await asyncio.to_thread(paste_back, image.rgb, pasted)
    await asyncio.to_thread(encode_image, result, "png")
    return time.perf_counter() - start


async def bounded(semaphore: asyncio.Semaphore, work) -> float:
    async with semaphore:
        return await work


async def whole_photo_latency(run: Run, name: str, model: nn.Module, concurrencies: list[int], photos: int) -> None:
    """Photos of two faces through decode, align, micro-batched restore, paste and PNG encode (GPEN ``name``)."""
    size = model.config.size
    photo = np.concatenate([astronaut(), astronaut()], axis=1)
    payload = encode_image(np.ascontiguousarray(photo), "jpeg", quality=92)
    rows = []
    for precision in run.precisions:
        batcher = MicroBatcher(
            model, run.device, max_batch=32, wait_s=0.01, autocast="bfloat16" if precision == "bf16" else None
        )
        worker = asyncio.create_task(batcher.run())
        for concurrency in concurrencies:
            await whole_photo(payload, batcher, size)
            semaphore = asyncio.Semaphore(concurrency)
            start = time.perf_counter()
            latencies = list(
                await asyncio.gather(*(bounded(semaphore, whole_photo(payload, batcher, size)) for _ in range(photos)))
            )
            wall = time.perf_counter() - start
            latencies.sort()
            p50 = latencies[len(latencies) // 2] * 1000
            p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] * 1000
            rows.append([precision, concurrency, photos, p50, p99, photos / wall])
        worker.cancel()
    REPORT.table(
        f"Whole photo, 2 faces, 1024x512 JPEG, {name} (decode, align, batched restore, paste, PNG encode)",
        ["precision", "concurrency", "photos", "p50 ms", "p99 ms", "photos/s"],
        rows,
    )


# --------------------------------------------------------------------------------------------------------------------
# Summary and main


def summary() -> None:
    rows = []
    for key, entry in REPORT.data["summary"].items():
        fp32, bf16 = entry.get("fp32", {}), entry.get("bf16", {})
        diff = entry.get("bf16_vs_fp32", {})
        rows.append(
            [
                key,
                entry.get("unit", ""),
                _best(fp32),
                _best(bf16),
                fp32.get("peak_mib_at_32", math.nan),
                bf16.get("peak_mib_at_32", math.nan),
                diff.get("max_abs", math.nan),
                diff.get("uint8_max_levels", math.nan),
                entry.get("load_ms", math.nan),
                entry.get("first_forward_ms", math.nan),
                "; ".join(f"{k}: {why} at {batch}" for k, (why, batch) in entry.get("failed_at_batch", {}).items())
                or "—",
            ]
        )
    header = ["model", "unit", "fp32 best (batch)", "bf16 best (batch)", "peak MiB fp32 @32", "peak MiB bf16 @32"]
    header += ["bf16 max abs", "bf16 max uint8", "load ms", "load+first ms", "stopped"]
    REPORT.table("Summary", header, rows)
    print("\nSUMMARY_JSON " + json.dumps(REPORT.data["summary"], default=float), flush=True)


def _best(entry: dict) -> str:
    return f"{entry['best_per_s']:.4g} ({entry['at_batch']}, {entry['layout']})" if entry else "—"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--quick", action="store_true", help="tiny models, batches 1 and 2 (CPU smoke test)")
    parser.add_argument("--out", type=Path, default=Path("test-output"))
    parser.add_argument("--budget-s", type=float, default=440.0, help="the whole run's time; sections get shares")
    parser.add_argument("--models-dir", type=Path, default=REPO_ROOT / "models", help="released MODNet, if carried")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    REPORT.path = args.out / "gpu_report.json"
    device = torch.device(args.device)
    if device.type == "cpu":
        torch.set_num_threads(min(2, torch.get_num_threads()))
    REPORT.data["environment"] = {
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
        "date": time.strftime("%Y-%m-%d"),
        "quick": args.quick,
    }
    print(json.dumps(REPORT.data["environment"]), flush=True)
    set_tf32(True)
    with tempfile.TemporaryDirectory(prefix="gpu_check_") as tmp:
        run = Run(device, Clock(args.budget_s), args.quick, Path(tmp), args.models_dir)
        failed = sections(run)
    LOADS.report()
    summary()
    if failed:
        sys.exit(f"sections that failed: {', '.join(failed)} (tracebacks above, and under 'errors' in the report)")


def sections(run: Run) -> list[str]:
    """Most wanted first: if the budget runs out, what is cut is the end. Returns the sections that failed."""
    quick = run.quick
    failed: list[str] = []

    def guarded(label: str, check: Callable[[], object]) -> object:
        """A failing section is reported (traceback, report entry, exit status) and the next one still runs."""
        try:
            return check()
        except Exception:  # one model's failure must not cost the others' numbers on a lent GPU
            traceback.print_exc()
            REPORT.data.setdefault("errors", {})[label] = traceback.format_exc(limit=4)
            REPORT.save()
            failed.append(label)
            return None
        finally:
            run.release()

    config = QUICK_GPEN if quick else GPEN_VARIANTS["gpen-bfr-512"]
    gpen = guarded("gpen-bfr-512", lambda: check_gpen(run, "gpen-bfr-512", config, share_s=45, cpu_reference=True))
    if gpen is not None and run.clock.left_s() > 200:
        concurrencies, photos = ([1], 2) if quick else ([1, 8, 32], 64)
        name = "gpen (tiny)" if quick else "gpen-bfr-512"
        latency = whole_photo_latency(run, name, gpen, concurrencies, photos)
        guarded("whole photo", partial(asyncio.run, latency))
    del gpen  # its memory back before the next model's peaks
    gfpgan = gfpgan_restorer(QUICK_GFPGAN if quick else GfpganConfig())
    guarded("gfpgan-v1.4", lambda: check_restorer(run, gfpgan, share_s=40))
    codeformer = codeformer_restorer(QUICK_CODEFORMER if quick else CODEFORMER_512)
    guarded("codeformer", lambda: check_restorer(run, codeformer, share_s=50))
    guarded("realesrgan-x4plus", lambda: check_realesrgan(run, "realesrgan-x4plus", share_s=60))
    guarded("realesrgan-x2plus", lambda: check_realesrgan(run, "realesrgan-x2plus", share_s=30))
    guarded("modnet", lambda: check_modnet(run, share_s=20))
    guarded("mtcnn", lambda: check_mtcnn(run, share_s=12))
    if not quick:
        gpen_256 = GPEN_VARIANTS["gpen-bfr-256"]
        guarded("gpen-bfr-256", lambda: check_gpen(run, "gpen-bfr-256", gpen_256, share_s=20, cpu_reference=False))
    if run.clock.left_s() > 25:
        sizes = {"288 head": (288, 288, [1])}
        if not quick:
            sizes = {"288 head": (288, 288, [1, 4, 16, 64]), "720p": (720, 1280, [1, 4, 16])}
        guarded("dctnet", lambda: dctnet_checks(run, sizes, repeats=1 if quick else 5))
    else:
        print(f"\nDCT-Net skipped: {run.clock.left_s():.0f} s of the budget left", flush=True)
    return failed


if __name__ == "__main__":
    main()
