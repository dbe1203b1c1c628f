"""One-shot GPU check: correctness and timings for every model, in one call on a lent GPU machine.

Runs with only torch, numpy, opencv and pillow (what the GPU image has; no Ray, no pydantic): the pure model and
image code of ``deployments/``. Weights are random with the official architectures (same FLOPs as the released
files). Prints markdown tables and writes ``gpu_report.json`` to ``--out``.

    python3 bench/gpu_check.py --out "$OUT"             # on the GPU machine (bench/gpu_check.sh)
    python3 bench/gpu_check.py --device cpu --quick     # smoke test anywhere
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from deployments.cartoon.dctnet import build_dctnet_from_constants, official_weight_shapes  # noqa: E402
from deployments.common.image import decode_image, encode_image  # noqa: E402
from deployments.faces.align import align_face, rescale_crop_matrix  # noqa: E402
from deployments.faces.paste import paste_back  # noqa: E402
from deployments.restore.engine import restore_with_gpen  # noqa: E402
from deployments.restore.gpen import GPEN_VARIANTS, GpenConfig, build_gpen, load_gpen  # noqa: E402

# Landmarks of the astronaut (skimage) face, so the whole-photo run needs no face detector on the GPU machine.
ASTRONAUT_POINTS = np.array([[204, 101], [247, 104], [226, 128], [209, 149], [242, 151]], dtype=np.float64)
REPORT: dict = {}


def timed(fn, *, repeats: int, device: torch.device) -> float:
    """Median seconds of ``fn()`` after two warm-up calls."""
    for _ in range(2):
        fn()
    sync(device)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync(device)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def table(title: str, header: list[str], rows: list[list]) -> None:
    print(f"\n### {title}\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in row) + " |")
    REPORT[title] = [dict(zip(header, row)) for row in rows]


def gpen_correctness(device: torch.device, config: GpenConfig) -> None:
    torch.manual_seed(0)
    model = build_gpen(config).eval()
    x = torch.rand(2, 3, config.size, config.size) * 2 - 1
    with torch.inference_mode():
        reference = model(x)
        gpu_model = model.to(device)
        fp32 = gpu_model(x.to(device)).float().cpu()
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            bf16 = gpu_model(x.to(device)).float().cpu()
    table(
        f"GPEN {config.size}: {device.type} vs CPU fp32 (random official weights, batch 2)",
        ["path", "max abs diff", "mean abs diff"],
        [
            ["fp32", float((fp32 - reference).abs().max()), float((fp32 - reference).abs().mean())],
            ["bf16 autocast", float((bf16 - reference).abs().max()), float((bf16 - reference).abs().mean())],
        ],
    )


def gpen_throughput(device: torch.device, name: str, batches: list[int], repeats: int) -> None:
    torch.manual_seed(0)
    config = GPEN_VARIANTS[name]
    model = build_gpen(config).eval().to(device)
    rows = []
    for precision in ("fp32", "bf16") if device.type == "cuda" else ("fp32",):
        for channels_last in (False, True) if device.type == "cuda" else (False,):
            net = model.to(memory_format=torch.channels_last) if channels_last else model
            for batch in batches:
                crops = [
                    np.random.default_rng(i).integers(0, 256, (config.size, config.size, 3), np.uint8)
                    for i in range(batch)
                ]
                if device.type == "cuda":
                    torch.cuda.reset_peak_memory_stats()
                autocast = "bfloat16" if precision == "bf16" else None
                run = partial(
                    restore_with_gpen, net, crops, device=device, autocast_dtype=autocast, channels_last=channels_last
                )
                seconds = timed(run, repeats=repeats, device=device)
                peak = torch.cuda.max_memory_allocated() / 2**20 if device.type == "cuda" else float("nan")
                rows.append(
                    [precision, "NHWC" if channels_last else "NCHW", batch, seconds * 1000, batch / seconds, peak]
                )
    table(
        f"{name} faces/s (pre/post-processing included)",
        ["precision", "layout", "batch", "ms/batch", "faces/s", "peak MiB"],
        rows,
    )


def dctnet_model(device: torch.device):
    rng = np.random.default_rng(0)
    consts = {k: (rng.standard_normal(s) * 0.05).astype(np.float32) for k, s in official_weight_shapes().items()}
    return build_dctnet_from_constants(consts, eps=0.01).to(device)


def dctnet_checks(device: torch.device, sizes: dict[str, tuple[int, int, list[int]]], repeats: int) -> None:
    if device.type == "cuda":
        torch.backends.cudnn.allow_tf32 = False  # as CartoonEngine does: exactness against the float32 graph
    cpu_model, gpu_model = dctnet_model(torch.device("cpu")), dctnet_model(device)
    probe = np.random.default_rng(1).integers(0, 256, (288, 288, 3), np.uint8)
    diff = np.abs(cpu_model(probe).astype(int) - gpu_model(probe).astype(int))
    table(
        f"DCT-Net {device.type} vs CPU on one 288 head (random official weights)",
        ["max diff", "values exact %", "values within 1 %"],
        [[int(diff.max()), float((diff == 0).mean() * 100), float((diff <= 1).mean() * 100)]],
    )
    rows = []
    for label, (height, width, batches) in sizes.items():
        for batch in batches:
            x = torch.rand(batch, 3, height, width, device=device) * 255
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats()
            seconds = timed(partial(gpu_model.forward_batch, x), repeats=repeats, device=device)
            peak = torch.cuda.max_memory_allocated() / 2**20 if device.type == "cuda" else float("nan")
            rows.append([label, batch, seconds * 1000, batch / seconds, peak])
    table("DCT-Net images/s (model only)", ["input", "batch", "ms/batch", "images/s", "peak MiB"], rows)


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
                restore_with_gpen, self.model, crops, device=self.device, autocast_dtype=self.autocast
            )
            for (_, future), face in zip(items, faces):
                future.set_result(face)


async def whole_photo(data: bytes, batcher: MicroBatcher, size: int) -> float:
    start = time.perf_counter()
    image = await asyncio.to_thread(decode_image, data)
    points = [ASTRONAUT_POINTS, ASTRONAUT_POINTS + [512, 0]]
    aligned = [await asyncio.to_thread(align_face, image.rgb, p, f"gpen-{size}") for p in points]
    restored = await asyncio.gather(*(batcher.restore(a.crop) for a in aligned))
    pasted = [(r, rescale_crop_matrix(a.matrix, a.crop.shape[0], r.shape[0])) for a, r in zip(aligned, restored)]
    result = await asyncio.to_thread(paste_back, image.rgb, pasted)
    await asyncio.to_thread(encode_image, result, "png")
    return time.perf_counter() - start


async def bounded(semaphore: asyncio.Semaphore, work) -> float:
    async with semaphore:
        return await work


async def whole_photo_latency(device: torch.device, name: str, concurrencies: list[int], photos: int) -> None:
    from skimage import data as skdata

    torch.manual_seed(0)
    config = GPEN_VARIANTS[name]
    model = build_gpen(config).eval().to(device)
    photo = np.concatenate([skdata.astronaut(), skdata.astronaut()], axis=1)
    payload = encode_image(np.ascontiguousarray(photo), "jpeg", quality=92)
    rows = []
    for precision in ("fp32", "bf16") if device.type == "cuda" else ("fp32",):
        batcher = MicroBatcher(
            model, device, max_batch=32, wait_s=0.01, autocast="bfloat16" if precision == "bf16" else None
        )
        worker = asyncio.create_task(batcher.run())
        for concurrency in concurrencies:
            await whole_photo(payload, batcher, config.size)
            semaphore = asyncio.Semaphore(concurrency)
            start = time.perf_counter()
            latencies = list(
                await asyncio.gather(
                    *(bounded(semaphore, whole_photo(payload, batcher, config.size)) for _ in range(photos))
                )
            )
            wall = time.perf_counter() - start
            latencies.sort()
            rows.append(
                [
                    precision,
                    concurrency,
                    photos,
                    latencies[len(latencies) // 2] * 1000,
                    latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] * 1000,
                    photos / wall,
                ]
            )
        worker.cancel()
    table(
        f"Whole photo, 2 faces, 1024x512 JPEG, {name} (decode, align, batched restore, paste, PNG encode)",
        ["precision", "concurrency", "photos", "p50 ms", "p99 ms", "photos/s"],
        rows,
    )


def cold_start(device: torch.device, tmp: Path) -> None:
    rows = []
    for name in ("gpen-bfr-512", "gpen-bfr-256"):
        path = tmp / f"{name}.pth"
        torch.save(build_gpen(GPEN_VARIANTS[name]).state_dict(), path)
        start = time.perf_counter()
        model = load_gpen(path).to(device)
        loaded = time.perf_counter() - start
        restore_with_gpen(model, [np.zeros((model.config.size,) * 2 + (3,), np.uint8)], device=device)
        sync(device)
        rows.append([name, loaded * 1000, (time.perf_counter() - start) * 1000])
    start = time.perf_counter()
    model = dctnet_model(device)
    model.forward_batch(torch.zeros(1, 3, 288, 288, device=device))
    sync(device)
    rows.append(["dctnet (one graph)", float("nan"), (time.perf_counter() - start) * 1000])
    table(
        "Model load and first forward (weights from local disk, CUDA context already up)",
        ["model", "load ms", "load + first forward ms"],
        rows,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--quick", action="store_true", help="small sizes and batches (CPU smoke test)")
    parser.add_argument("--out", type=Path, default=Path("test-output"))
    args = parser.parse_args()
    device = torch.device(args.device)
    args.out.mkdir(parents=True, exist_ok=True)
    REPORT["environment"] = {
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
        "date": time.strftime("%Y-%m-%d"),
    }
    print(json.dumps(REPORT["environment"]))
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
    if args.quick:
        gpen_correctness(device, GpenConfig(size=64, style_dim=64, n_mlp=2, narrow=0.25))
        gpen_throughput(device, "gpen-bfr-256", [1], repeats=1)
        dctnet_checks(device, {"288 head": (288, 288, [1])}, repeats=1)
        asyncio.run(whole_photo_latency(device, "gpen-bfr-256", [1], photos=2))
    else:
        gpen_correctness(device, GPEN_VARIANTS["gpen-bfr-512"])
        for name in ("gpen-bfr-512", "gpen-bfr-256"):
            gpen_throughput(device, name, [1, 2, 4, 8, 16, 32, 64], repeats=5)
        dctnet_checks(device, {"288 head": (288, 288, [1, 4, 16, 64]), "720p": (720, 1280, [1, 4, 16])}, repeats=5)
        asyncio.run(whole_photo_latency(device, "gpen-bfr-512", [1, 8, 32], photos=96))
        cold_start(device, args.out)
    (args.out / "gpu_report.json").write_text(json.dumps(REPORT, indent=2, default=float), encoding="utf-8")


if __name__ == "__main__":
    main()
