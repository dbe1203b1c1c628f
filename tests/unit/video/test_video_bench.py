"""The CPU side of the GPU check's video section (``bench/gpu/video.py``): the clip it makes has its heads where it
says, and a small clip goes through the restore video pipeline with a tiny GPEN, every frame and face accounted for."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import av
import numpy as np
import pytest
import torch

from bench.gpu.harness import ASTRONAUT_POINTS, Clock, Run, astronaut
from bench.gpu.restorers import QUICK_GPEN, gpen_template
from bench.gpu.video import VideoCase, faces_frame, video_frames_per_s
from deployments.faces.align import align_face
from deployments.restore.gpen import build_gpen
from deployments.video.tracking import FaceTracker, TrackingOptions


@pytest.mark.parametrize("faces", [1, 4])
def test_the_bench_clip_has_each_head_at_its_landmarks(faces):
    """Aligning a frame at a head's landmarks gives the crop the astronaut gives at its own (the head as pasted)."""
    case = VideoCase(faces, 640, 360, frames=5)
    reference = align_face(astronaut(), ASTRONAUT_POINTS, gpen_template(256)).crop.astype(np.float32)
    frame, heads = faces_frame(4, case)
    assert frame.shape == (360, 640, 3) and len(heads) == faces
    for head in heads:
        x0, y0, x1, y1 = head.box
        assert x0 <= head.landmarks[:, 0].min() and head.landmarks[:, 0].max() <= x1 <= 640
        assert y0 <= head.landmarks[:, 1].min() and head.landmarks[:, 1].max() <= y1 <= 360
        crop = align_face(frame, head.landmarks, gpen_template(256)).crop.astype(np.float32)
        centre = slice(64, 192)  # the face itself (the border shows the synthetic background)
        assert np.abs(crop[centre, centre] - reference[centre, centre]).mean() < 12
    assert len({head.box for head in heads}) == faces


@pytest.mark.parametrize("faces", [1, 4])
def test_the_bench_clip_keeps_one_track_per_head(faces):
    """The heads move slowly enough for the tracker to follow each: no extra tracks fading in and out."""
    case = VideoCase(faces, 160, 96, frames=12)
    tracker = FaceTracker(case.fps, TrackingOptions())
    tracked = [tracker.step(faces_frame(index, case)[1]) for index in range(case.frames)]
    assert [len(frame) for frame in tracked] == [faces] * case.frames
    assert tracker.tracks_started == faces


def test_a_small_clip_goes_through_the_restore_video_pipeline(tmp_path: Path):
    torch.manual_seed(0)
    model = build_gpen(QUICK_GPEN).eval()
    run = Run(torch.device("cpu"), Clock(600), True, tmp_path, tmp_path / "models")
    (row,) = asyncio.run(video_frames_per_s(run, "gpen (tiny)", model, [VideoCase(1, 160, 96, frames=12)]))
    assert row[:5] == ["fp32", 1, "160x96", 12, 1.0]
    assert row[5] > 0 and math.isclose(row[6], 12 / row[5])
    with av.open(str(tmp_path / "video-1-fp32.mp4")) as result:
        assert sum(1 for _ in result.decode(video=0)) == 12
