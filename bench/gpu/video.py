"""Videos through the restore video pipeline on the device: frames/s of a 1080p clip with one and with four faces.

The clip is made here (the astronaut's head, one moving across the frame or four in a 2x2 grid, zooming), so the
faces' landmarks are known: the analyzer answers them instead of running a detector (detection runs on the CPU
replicas; its networks are timed by ``bench/gpu/mtcnn.py``). Everything else is the service's video path:
``transcode_video`` decodes in chunks, tracks and smooths the landmarks, and per frame aligns each face, restores it
through the micro-batcher that ``whole_photo.py`` uses (faces of many frames share a batch), pastes it back with its
track's opacity, encodes H.264 segments and assembles the MP4. Needs PyAV (``av``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np
from torch import nn

from bench.gpu.harness import ASTRONAUT_POINTS, Run, astronaut
from bench.gpu.report import REPORT
from bench.gpu.restorers import gpen_template
from bench.gpu.whole_photo import MicroBatcher
from deployments.faces.align import align_face, rescale_crop_matrix
from deployments.faces.paste import paste_back
from deployments.faces.types import Face
from deployments.video.pipeline import FolderChunkStore, FrameResult, VideoOptions, transcode_video
from deployments.video.probe import VideoLimits, probe_video
from deployments.video.tracking import TrackedFace

HEAD_BOX = (20, 280, 120, 360)  # rows, columns of the astronaut's head (as tests/unit/video/clips.py crops it)


@dataclass(frozen=True)
class VideoCase:
    faces: int  # 1: one head crossing the frame; 4: a 2x2 grid of heads
    width: int
    height: int
    frames: int
    fps: int = 25


def faces_frame(index: int, case: VideoCase) -> tuple[np.ndarray, list[Face]]:
    """Frame ``index`` (RGB) and each head on it as the analyzer would find it: the pasted head's box, its five
    landmarks."""
    top, bottom, left, right = HEAD_BOX
    head = astronaut()[top:bottom, left:right]
    progress = index / max(case.frames - 1, 1)
    grid = 1 if case.faces == 1 else 2
    cell_w, cell_h = case.width // grid, case.height // grid
    scale = (0.6 + 0.4 * progress) * cell_h / head.shape[0] * 0.8
    head = cv2.resize(head, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
    yy, xx = np.mgrid[0 : case.height, 0 : case.width]
    canvas = np.stack([(xx * 3) % 256, (yy * 2) % 256, np.full_like(xx, 90)], axis=-1).astype(np.uint8)
    faces = []
    for cell in range(case.faces):
        x0 = (cell % grid) * cell_w + int(progress * (cell_w - head.shape[1]))
        y0 = (cell // grid) * cell_h + (cell_h - head.shape[0]) // 2
        canvas[y0 : y0 + head.shape[0], x0 : x0 + head.shape[1]] = head
        points = ((ASTRONAUT_POINTS - [left, top]) * scale + [x0, y0]).astype(np.float32)
        box = (float(x0), float(y0), float(x0 + head.shape[1]), float(y0 + head.shape[0]))
        faces.append(_face(points, box))
    return canvas, faces


def write_clip(path: Path, case: VideoCase) -> list[list[Face]]:
    """An H.264 MP4 of ``case`` at ``path`` (no audio); the heads of every frame."""
    heads = []
    with av.open(str(path), "w", format="mp4") as out:
        stream = out.add_stream("libx264", rate=case.fps)
        stream.width, stream.height, stream.pix_fmt = case.width, case.height, "yuv420p"
        for index in range(case.frames):
            rgb, faces = faces_frame(index, case)
            heads.append(faces)
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
            frame.pts, frame.time_base = index, Fraction(1, case.fps)
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    return heads


def known_faces(heads: Sequence[list[Face]]) -> Callable[[np.ndarray], Awaitable[list[Face]]]:
    """An analyzer answering each frame's known heads, in decoding order: ``transcode_video`` (detecting on every
    frame, the default) calls it once per frame, in order."""
    frames = iter(heads)

    def analyze(rgb: np.ndarray) -> Awaitable[list[Face]]:
        faces = next(frames)

        async def found() -> list[Face]:
            return faces

        return found()

    return analyze


def _face(points: np.ndarray, box: tuple[float, float, float, float]) -> Face:
    eyes = points[1] - points[0]
    roll_deg = float(np.degrees(np.arctan2(eyes[1], eyes[0])))
    return Face(box=box, score=1.0, landmarks=points, roll_deg=roll_deg, chin=((box[0] + box[2]) / 2, box[3]))


def frame_restorer(batcher: MicroBatcher, size_px: int) -> Callable[[np.ndarray, Sequence[TrackedFace]], Awaitable]:
    """The restore job on one frame (upscale 1): align each tracked face, restore it in the shared micro-batches,
    paste it back with its track's opacity."""
    template = gpen_template(size_px)

    async def process_frame(rgb: np.ndarray, faces: Sequence[TrackedFace]) -> FrameResult:
        aligned = [await asyncio.to_thread(align_face, rgb, face.landmarks, template) for face in faces]
        restored = await asyncio.gather(*(batcher.restore(a.crop) for a in aligned))
        pasted = [(r, rescale_crop_matrix(a.matrix, a.crop.shape[0], r.shape[0])) for a, r in zip(aligned, restored)]
        opacities = [face.opacity for face in faces]
        result = await asyncio.to_thread(paste_back, rgb, pasted, opacities=opacities) if pasted else rgb
        return FrameResult(result, [])

    return process_frame


async def video_frames_per_s(run: Run, name: str, model: nn.Module, cases: Sequence[VideoCase]) -> list[list]:
    """Each case through ``transcode_video`` per precision: frames/s and where the time went; one table."""
    rows = []
    options = VideoOptions(chunk_frames=16, frames_in_flight=8)
    for case in cases:
        clip = run.tmp / f"video-{case.faces}-faces.mp4"
        heads = await asyncio.to_thread(write_clip, clip, case)
        info = await asyncio.to_thread(probe_video, clip, VideoLimits(max_frame_pixels=case.width * case.height))
        for precision in run.precisions:
            batcher = MicroBatcher(
                model, run.device, max_batch=32, wait_s=0.01, autocast="bfloat16" if precision == "bf16" else None
            )
            worker = asyncio.create_task(batcher.run())
            chunks = FolderChunkStore(run.tmp / f"chunks-{case.faces}-{precision}")
            out = run.tmp / f"video-{case.faces}-{precision}.mp4"
            start = time.perf_counter()
            report = await transcode_video(
                clip, info, known_faces(heads), frame_restorer(batcher, model.config.size), chunks, out, options
            )
            wall_s = time.perf_counter() - start
            worker.cancel()
            stages = [report.timings_ms.get(stage, 0.0) for stage in ("decode", "analyze", "frames", "encode")]
            faces = sum(report.faces_per_frame) / max(report.frames, 1)
            rows.append([precision, case.faces, f"{case.width}x{case.height}", report.frames, faces])
            rows[-1] += [wall_s, report.frames / wall_s, *stages]
    REPORT.table(
        f"Video, restore ({name}): H.264 clip through decode, tracking, batched restore, paste, encode, assemble",
        ["precision", "faces", "size", "frames", "faces/frame", "wall s", "frames/s"]
        + ["decode ms", "analyze ms", "frames ms", "encode ms"],
        rows,
    )
    return rows
