"""A video through a job that maps frame to frame (the registry's ``frames``), for the asynchronous paths only:
``POST /v1/jobs`` and bucket routes hand it over as a ``VideoInput`` (a file on disk and where its chunks are kept).

The frames go through the same deployments as photos, as ordinary batched calls (``deployments/video/pipeline.py``);
the limits hold on what is decoded, not only on the header, and the decoding, encoding and final join run under the
job's deadline (``run_in_worker``, and its check between packets inside them); the chunks are kept in the job's
output store under ``_work/<key>/`` so a replica lost mid-video resumes from the last finished chunk; they are deleted
once the result is written.
"""

from __future__ import annotations

import functools
import importlib
import json
import math
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deployments.common.errors import UnsupportedVideo, VideoTooLarge
from deployments.common.params import JobParams
from deployments.faces.types import ANALYZE_FACES
from deployments.video.pipeline import ChunkStore, FolderChunkStore, transcode_video
from deployments.video.probe import estimate_output_bytes, looks_like_video, probe_video
from serve_app.backend import Backend
from serve_app.byte_caps import SNIFF_BYTES
from serve_app.jobs.context import JobContext
from serve_app.jobs.deadline import current_checkpoint, run_in_worker
from serve_app.jobs.progress import JSON_TYPE, PROGRESS_NAME, work_prefix
from serve_app.jobs.results import JobResult, build_meta, engine_summary
from serve_app.registry import JOB_ENTRIES, job_entry
from storage.base import ObjectInfo, ObjectStore
from storage.errors import ObjectNotFound, ObjectTooLarge

VIDEO_MEDIA_TYPE = "video/mp4"
VIDEO_SUFFIXES = (".mp4", ".mov", ".m4v", ".mkv", ".webm")


@dataclass(frozen=True)
class VideoInput:
    """A video to process: ``path`` on local disk, ``chunks`` where finished chunks are kept (and found again after
    a crash), ``result`` where the finished MP4 is written (a file of the caller's, which stores it from there with
    ``put_file`` and deletes it: a result of up to ``max_output_bytes`` is never held in memory), ``on_progress``
    told the fraction of frames done."""

    path: Path
    chunks: ChunkStore
    result: Path
    on_progress: Callable[[float], None] | None = None


async def run_video(
    backend: Backend, task: str, video: VideoInput, params: JobParams, context: JobContext
) -> JobResult:
    entry = job_entry(task)
    if not entry.frames:
        raise UnsupportedVideo(f"the {task} job takes photos, not videos; video jobs: {', '.join(video_tasks())}")
    settings = context.video
    info = await run_in_worker(probe_video, video.path, settings.limits)
    scale = int(getattr(params, "upscale", 1))
    estimate = estimate_output_bytes(info, scale)
    if estimate > settings.limits.max_output_bytes:
        raise VideoTooLarge(
            f"the result would be about {estimate} bytes, over the limit max_output_bytes="
            f"{settings.limits.max_output_bytes}",
            details={"limit": "max_output_bytes", "value": estimate, "max": settings.limits.max_output_bytes},
        )
    module = importlib.import_module(entry.module)
    process_frame = await module.frame_processor(backend, params, context)
    report = await transcode_video(
        video.path,
        info,
        functools.partial(backend.call, ANALYZE_FACES),
        process_frame,
        video.chunks,
        video.result,
        settings.options,
        on_progress=video.on_progress,
        limits=settings.limits,
        in_worker=run_in_worker,
        checkpoint=current_checkpoint(),
    )
    size_bytes = video.result.stat().st_size
    if size_bytes > settings.limits.max_output_bytes:
        raise VideoTooLarge(
            f"the result is {size_bytes} bytes, over the limit max_output_bytes={settings.limits.max_output_bytes}",
            details={"limit": "max_output_bytes", "value": size_bytes, "max": settings.limits.max_output_bytes},
        )
    engine, weights = engine_summary(report.engines, fallback="none (no frame)")
    meta = build_meta(
        task,
        params,
        engine,
        weights,
        faces=max(report.faces_per_frame, default=0),
        size_wh=(info.width * scale, info.height * scale),
        media_type=VIDEO_MEDIA_TYPE,
        body=video.result,
        timings_ms=report.timings_ms,
    ).model_copy(update={"video": report.to_json()})
    return JobResult(body=video.result, media_type=VIDEO_MEDIA_TYPE, meta=meta)


def read_object(store: ObjectStore, key: str, folder: Path, context: JobContext) -> tuple[bytes | Path, ObjectInfo]:
    """An object of a bucket or jobs route: a photo's bytes (at most the image cap), or the path of a video streamed
    to ``folder`` (at most the video cap). Blocking."""
    caps = context.media_caps()
    path = folder / "source"
    with path.open("wb") as handle:
        try:
            info = store.get_to(key, handle, max_bytes=caps.most_bytes)
        except ObjectTooLarge as exc:
            raise caps.object_refusal(exc) from exc
    with path.open("rb") as handle:
        head = handle.read(SNIFF_BYTES)
    caps.check(head, info.size_bytes, f"the object {key!r}")
    return (path if looks_like_video(head) else path.read_bytes()), info


def check_media(task: str, data: bytes | Path, context: JobContext) -> None:
    """What ``POST /v1/jobs`` checks of its input (its bytes, or the file holding them) before accepting it: a video
    against the video limits (its header) and the job's ability to take one; either against its kind's byte cap.
    Blocking."""
    if isinstance(data, Path):
        with open(data, "rb") as file:
            head, size_bytes = file.read(SNIFF_BYTES), os.fstat(file.fileno()).st_size
    else:
        head, size_bytes = data[:SNIFF_BYTES], len(data)
    context.media_caps().check(head, size_bytes, "the upload")
    if not looks_like_video(head):
        return
    if not job_entry(task).frames:
        raise UnsupportedVideo(f"the {task} job takes photos, not videos; video jobs: {', '.join(video_tasks())}")
    if isinstance(data, Path):
        probe_video(data, context.video.limits)  # the header only: a file of any size costs no memory
        return
    with tempfile.TemporaryDirectory(prefix="portrait-probe-") as folder:
        path = Path(folder) / "source"
        path.write_bytes(data)
        probe_video(path, context.video.limits)


def video_tasks() -> list[str]:
    return [entry.name for entry in JOB_ENTRIES if entry.frames]


def video_deadline_factor(path: Path, context: JobContext) -> int:
    """A video gets the job timeout once per chunk (a 10-minute film is not a 12 MP photo); at least once."""
    info = probe_video(path, context.video.limits)
    return max(1, math.ceil(info.frames / context.video.options.chunk_frames))


class StoreChunkStore:
    """A video's finished chunks in an object store (``<prefix>chunk-00012.mp4`` and ``.json``, the JSON written
    last), mirrored to a local folder as they are read back for the final join."""

    def __init__(
        self, store: ObjectStore, prefix: str, local: Path, source_alive: Callable[[], bool] | None = None
    ) -> None:
        self._store, self._prefix, self._local = store, prefix, FolderChunkStore(local)
        self._source_alive = source_alive

    @classmethod
    def for_object(
        cls, store: ObjectStore, key: str, local: Path, source_alive: Callable[[], bool] | None = None
    ) -> StoreChunkStore:
        """``source_alive``: asked before each chunk is stored; False (the job was cancelled, the object deleted)
        stops the video there (``ObjectNotFound``), its chunks deleted."""
        return cls(store, work_prefix(key), local, source_alive)

    def _key(self, index: int, suffix: str) -> str:
        return f"{self._prefix}chunk-{index:05d}{suffix}"

    def finished(self) -> int:
        count = 0
        while self._store.exists(self._key(count, ".json")):
            count += 1
        return count

    def save(self, index: int, segment: Path, state: dict[str, Any]) -> None:
        if self._source_alive is not None and not self._source_alive():
            self.clear()
            raise ObjectNotFound("the video was cancelled or deleted while it ran", key=self._prefix)
        self._store.put_file(self._key(index, ".mp4"), segment, content_type=VIDEO_MEDIA_TYPE)
        self._store.put(self._key(index, ".json"), json.dumps(state).encode(), content_type=JSON_TYPE)
        progress = {"progress": state.get("progress", 0.0), "chunks": index + 1}
        self._store.put(self._prefix + PROGRESS_NAME, json.dumps(progress).encode(), content_type=JSON_TYPE)
        self._local.save(index, segment, state)

    def segment(self, index: int) -> Path:
        local = self._local.segment(index)
        if not local.exists():
            with local.open("wb") as handle:
                self._store.get_to(self._key(index, ".mp4"), handle, max_bytes=1 << 31)
        return local

    def state(self, index: int) -> dict[str, Any]:
        return json.loads(self._store.get(self._key(index, ".json"), max_bytes=1 << 26).data)

    def clear(self) -> None:
        """Delete every chunk (the result is written)."""
        for info in list(self._store.list(self._prefix)):
            self._store.delete(info.key)
