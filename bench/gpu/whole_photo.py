"""Whole photos through decode, align, micro-batched restore, paste and PNG encode, under concurrency."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import torch
from torch import nn

from bench.gpu.harness import ASTRONAUT_POINTS, Run, astronaut
from bench.gpu.report import REPORT
from bench.gpu.restorers import gpen_template
from deployments.common.image import decode_image, encode_image
from deployments.faces.align import align_face, rescale_crop_matrix
from deployments.faces.paste import paste_back
from deployments.restore.inference import restore_batch


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
