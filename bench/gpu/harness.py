"""What every model's check shares: the run (device, time budget, batches), timing, throughput sweeps with peak
memory, precision tables and model loads."""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

from bench.gpu.report import REPORT
from deployments.common.torch_device import to_memory_format

# Landmarks of the astronaut (skimage) face, so the whole-photo run needs no face detector on the GPU machine.
ASTRONAUT_POINTS = np.array([[204, 101], [247, 104], [226, 128], [209, 149], [242, 151]], dtype=np.float64)
BATCHES = [1, 2, 4, 8, 16, 32, 64]
AMP_DTYPES = {"fp32": None, "bf16": torch.bfloat16}
LAYOUTS = {"NCHW": torch.contiguous_format, "NHWC": torch.channels_last}


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
