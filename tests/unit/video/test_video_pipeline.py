"""A video through a frame-to-frame job: every frame once, in order, faces tracked, resumable after a crash."""

from __future__ import annotations

import asyncio
from pathlib import Path

import av
import numpy as np
import pytest

from deployments.common.engine import EngineInfo
from deployments.common.weights import ModelStore, load_manifest
from deployments.faces.analyze import FaceAnalysisConfig, FaceAnalysisPredictor
from deployments.video.frames import read_chunks
from deployments.video.pipeline import FolderChunkStore, FrameResult, VideoOptions, transcode_video
from deployments.video.probe import VideoLimits, probe_video
from deployments.video.tracking import FaceTracker, TrackingOptions
from tests.unit.video.clips import make_clip
from tests.unit.video.test_video_tracking import _residual_px

INVERT = EngineInfo("invert", neural=False)


@pytest.fixture(scope="module")
def analyzer(mediapipe_dir) -> FaceAnalysisPredictor:
    from serve_app.settings import Settings

    store = ModelStore(mediapipe_dir.parent, load_manifest(Settings().models_manifest))
    return FaceAnalysisPredictor.from_store(store, FaceAnalysisConfig(num_threads=1))


def _run(source: Path, work: Path, analyzer, process_frame, out: Path):
    info = probe_video(source, VideoLimits())

    async def analyze(rgb):
        return await asyncio.to_thread(analyzer.analyze, rgb)

    return asyncio.run(
        transcode_video(source, info, analyze, process_frame, FolderChunkStore(work), out, VideoOptions(chunk_frames=8))
    )


async def _invert(rgb, faces):
    return FrameResult(255 - rgb, [INVERT])


def _frames(path: Path) -> list[np.ndarray]:
    with av.open(str(path)) as container:
        return [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]


def test_every_frame_goes_through_the_job_once_in_order_with_its_tracked_face(tmp_path, analyzer):
    source = make_clip(tmp_path / "in.mp4", seconds=1.0, width=320, height=240)
    report = _run(source, tmp_path / "work", analyzer, _invert, tmp_path / "out.mp4")
    assert (report.frames, report.resumed_from_chunk, report.tracks) == (25, 0, 1)
    assert report.faces_per_frame == [1] * 25  # the astronaut's face, tracked across the whole clip
    frames_in, frames_out = _frames(source), _frames(tmp_path / "out.mp4")
    assert len(frames_out) == 25
    for index in (0, 12, 24):
        assert np.abs((255 - frames_in[index]).astype(np.float32) - frames_out[index]).mean() < 4.0


def test_a_crash_mid_video_resumes_from_the_last_stored_chunk(tmp_path, analyzer):
    source = make_clip(tmp_path / "in.mp4", seconds=1.0, width=320, height=240)
    calls = {"n": 0}

    async def crash_in_chunk_two(rgb, faces):
        calls["n"] += 1
        if calls["n"] == 20:
            raise MemoryError("replica lost")
        return await _invert(rgb, faces)

    with pytest.raises(MemoryError):
        _run(source, tmp_path / "work", analyzer, crash_in_chunk_two, tmp_path / "out.mp4")
    assert FolderChunkStore(tmp_path / "work").finished() == 2
    report = _run(source, tmp_path / "work", analyzer, _invert, tmp_path / "out.mp4")
    assert (report.resumed_from_chunk, report.frames, len(_frames(tmp_path / "out.mp4"))) == (2, 25, 25)
    assert report.faces_per_frame == [1] * 25


def _eye_track(source: Path, analyzer, tracking: TrackingOptions) -> np.ndarray:
    tracker = FaceTracker(25.0, tracking)
    eyes = []
    for chunk in read_chunks(source, 25):
        for frame in chunk.frames:
            (face,) = tracker.step(analyzer.analyze(frame))
            eyes.append(face.landmarks[:2])
    return np.stack(eyes)


def test_on_a_real_face_moving_and_zooming_smoothing_cuts_the_eye_jitter_at_least_in_half(tmp_path, analyzer):
    """Jitter: the RMS residual of the eye positions after a cubic fit along time (the face's own motion removed)."""
    source = make_clip(tmp_path / "in.mp4", seconds=4.0, width=640, height=480, audio=None)  # as bench_video
    per_frame = _residual_px(_eye_track(source, analyzer, TrackingOptions(smooth=False)))
    smoothed = _residual_px(_eye_track(source, analyzer, TrackingOptions()))
    assert smoothed * 2 <= per_frame, (per_frame, smoothed)
