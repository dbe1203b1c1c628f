"""A video through an image job that maps frame to frame, a chunk at a time, resumable from the last stored chunk.

Per chunk: decode (bounded), detect faces on the detection frames (ordinary batched calls: frames of this and other
videos share the analyzer's batches), follow and smooth them with the tracker (in frame order), run the job on every
frame with its tracked faces (again batched calls, at most ``frames_in_flight`` frames at once), encode the chunk as a
segment and store it with the tracker's state. When every chunk is stored, the segments and the audio are joined.
A replica lost mid-video leaves the stored chunks behind; the next attempt starts after the last of them.

What is decoded is held to the request's ``VideoLimits`` frame by frame (``frames.read_chunks``), not to the header.
No Ray, no HTTP: the job's stages arrive as functions (``analyze``, ``process_frame``), storage as a ``ChunkStore``,
the job's deadline as ``in_worker`` (runs the blocking work: decoding, encoding, storing, the final join; refuses once
the deadline passed) and ``checkpoint`` (called between packets inside that work; raises to stop it).
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from deployments.common.engine import EngineInfo
from deployments.common.timings import Timings
from deployments.faces.types import Face
from deployments.video.frames import Checkpoint, FrameChunk, assemble, encode_segment, no_checkpoint, read_chunks
from deployments.video.probe import VideoInfo, VideoLimits
from deployments.video.tracking import FaceTracker, TrackedFace, TrackingOptions


@dataclass(frozen=True)
class VideoOptions:
    chunk_frames: int = 16  # frames decoded, processed and stored together (memory per video ~ chunk × frame size)
    frames_in_flight: int = 8  # frames of one video whose stages are awaited at once
    tracking: TrackingOptions = field(default_factory=TrackingOptions)


@dataclass(frozen=True, eq=False)
class FrameResult:
    rgb: np.ndarray
    engines: list[EngineInfo]


Analyze = Callable[[np.ndarray], Awaitable[list[Face]]]
ProcessFrame = Callable[[np.ndarray, Sequence[TrackedFace]], Awaitable[FrameResult]]
InWorker = Callable[..., Awaitable[Any]]  # ``fn(*args)`` in a worker thread, as ``asyncio.to_thread``


class ChunkStore(Protocol):
    """Where a video job keeps its finished chunks (a folder, or the jobs store), so a retry resumes."""

    def finished(self) -> int:
        """How many chunks from the first are stored without a gap."""
        ...

    def save(self, index: int, segment: Path, state: dict[str, Any]) -> None: ...

    def segment(self, index: int) -> Path:
        """A local path holding chunk ``index``'s segment (fetched from the store when needed)."""
        ...

    def state(self, index: int) -> dict[str, Any]: ...


class FolderChunkStore:
    """Chunks as files in one folder: ``chunk-00012.mp4`` and ``chunk-00012.json`` (the JSON written last)."""

    def __init__(self, folder: Path) -> None:
        self._folder = folder
        folder.mkdir(parents=True, exist_ok=True)

    def _paths(self, index: int) -> tuple[Path, Path]:
        stem = self._folder / f"chunk-{index:05d}"
        return stem.with_suffix(".mp4"), stem.with_suffix(".json")

    def finished(self) -> int:
        count = 0
        while self._paths(count)[1].exists():
            count += 1
        return count

    def save(self, index: int, segment: Path, state: dict[str, Any]) -> None:
        video, record = self._paths(index)
        if segment != video:
            segment.replace(video)
        partial = record.with_suffix(".json.partial")
        partial.write_text(json.dumps(state))
        partial.replace(record)

    def segment(self, index: int) -> Path:
        return self._paths(index)[0]

    def state(self, index: int) -> dict[str, Any]:
        return json.loads(self._paths(index)[1].read_text())


@dataclass(frozen=True)
class VideoReport:
    """What the result record says about a video: its facts, faces per frame, tracks, where it resumed, timings."""

    info: VideoInfo
    frames: int
    faces_per_frame: list[int]
    tracks: int
    resumed_from_chunk: int
    engines: list[EngineInfo]
    timings_ms: dict[str, float]

    def to_json(self) -> dict[str, Any]:
        return {
            **self.info.to_json(),
            "frames": self.frames,
            "faces_per_frame": self.faces_per_frame,
            "tracks": self.tracks,
            "resumed_from_chunk": self.resumed_from_chunk,
            "timings_ms": self.timings_ms,
        }


async def transcode_video(
    source: Path,
    info: VideoInfo,
    analyze: Analyze,
    process_frame: ProcessFrame,
    chunks: ChunkStore,
    out_path: Path,
    options: VideoOptions,
    *,
    on_progress: Callable[[float], None] | None = None,
    limits: VideoLimits | None = None,
    in_worker: InWorker = asyncio.to_thread,
    checkpoint: Checkpoint = no_checkpoint,
) -> VideoReport:
    """Run ``process_frame`` over every frame of ``source`` into ``out_path`` (H.264 MP4 with the source's audio, cut
    at the video's end); every decoded frame held to ``limits`` (``VideoLimits()`` when None)."""
    timings = Timings()
    fps = float(info.fps)
    resumed = chunks.finished()
    state = chunks.state(resumed - 1) if resumed else None
    tracker = (
        FaceTracker.from_state(fps, options.tracking, state["tracker"]) if state else FaceTracker(fps, options.tracking)
    )
    faces_per_frame: list[int] = list(state["faces_per_frame"]) if state else []
    engines: dict[str, EngineInfo] = {}
    rotation = state["rotation_deg"] if state else 0
    gate = asyncio.Semaphore(options.frames_in_flight)
    decoded = read_chunks(source, options.chunk_frames, first_chunk=resumed, limits=limits, checkpoint=checkpoint)
    while True:
        with timings.phase("decode"):
            chunk = await in_worker(next, decoded, None)
        if chunk is None:
            break
        rotation = chunk.rotation_deg
        with timings.phase("analyze"):
            tracked = await _track(chunk, tracker, analyze, gate)
        with timings.phase("frames"):
            results = await asyncio.gather(
                *(_bounded(gate, process_frame(f, t)) for f, t in zip(chunk.frames, tracked))
            )
        for result in results:
            engines.update({info_.engine + (info_.weights or ""): info_ for info_ in result.engines})
        faces_per_frame.extend(len(faces) for faces in tracked)
        segment = out_path.with_name(f"{out_path.stem}.chunk-{chunk.index:05d}.mp4")
        with timings.phase("encode"):
            await in_worker(encode_segment, chunk, [r.rgb for r in results], info.fps, segment)
        progress = min(1.0, len(faces_per_frame) / max(info.frames, 1))
        chunk_state = {
            "tracker": tracker.state(),
            "faces_per_frame": faces_per_frame,
            "rotation_deg": rotation,
            "progress": progress,
        }
        await in_worker(chunks.save, chunk.index, segment, chunk_state)
        if on_progress is not None:
            on_progress(progress)
    total = chunks.finished()
    segments = [chunks.segment(index) for index in range(total)]
    with timings.phase("assemble"):
        await in_worker(functools.partial(assemble, checkpoint=checkpoint), segments, source, rotation, out_path)
    return VideoReport(
        info=info,
        frames=len(faces_per_frame),
        faces_per_frame=faces_per_frame,
        tracks=tracker.tracks_started,
        resumed_from_chunk=resumed,
        engines=list(engines.values()),
        timings_ms=timings.ms,
    )


async def _track(
    chunk: FrameChunk, tracker: FaceTracker, analyze: Analyze, gate: asyncio.Semaphore
) -> list[list[TrackedFace]]:
    """Detect on this chunk's detection frames (together), then step the tracker through the frames in order."""
    numbers = [chunk.start_frame + offset for offset in range(len(chunk.frames))]
    wanted = [tracker.is_detection_frame(number) for number in numbers]
    found = await asyncio.gather(
        *(_bounded(gate, analyze(frame)) for frame, detect in zip(chunk.frames, wanted) if detect)
    )
    detections = iter(found)
    return [tracker.step(next(detections) if detect else None) for detect in wanted]


async def _bounded(gate: asyncio.Semaphore, work: Awaitable[Any]) -> Any:
    async with gate:
        return await work
