"""A video is bounded by what it decodes to, not by what its header says (#32): frames that grow mid-stream, a header
that under-states the frames or the length, a stream nothing can be decoded from, codecs we do not read, and decoding
that must stop at the job's deadline. The hostile MKVs are made here (``crafted.py``), each in well under a second."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import av
import numpy as np
import pytest

from deployments.common.errors import CorruptVideo, RequestTimeout, UnsupportedVideo, VideoTooLarge
from deployments.video.frames import read_chunks
from deployments.video.probe import VideoLimits, probe_video
from tests.unit.video.crafted import claim_duration, damage_packets, write_mkv

SMALL = VideoLimits(max_frame_pixels=64 * 64)
ROOT = Path(__file__).resolve().parents[3]


def _frames(path, limits: VideoLimits, chunk_frames: int = 16, **options) -> list[np.ndarray]:
    return [frame for chunk in read_chunks(path, chunk_frames, limits=limits, **options) for frame in chunk.frames]


@pytest.mark.parametrize(
    ("size", "value"),
    [((64, 96), 64 * 96), ((1024, 1024), None)],
    ids=["named by our check (under 2x the limit)", "refused by the decoder (far over it)"],
)
def test_the_first_frame_over_max_frame_pixels_mid_stream_is_a_413_before_it_is_converted_or_kept(
    tmp_path, size, value
):
    """12 frames of 64×64 (what the header says), then 20 larger ones: refused at frame 12, none of them kept."""
    clip = write_mkv(tmp_path / "grows.mkv", [(64, 64, 12), (*size, 20)])
    assert probe_video(clip, SMALL).width == 64  # the header passes

    kept = []
    with pytest.raises(VideoTooLarge) as refused:
        for chunk in read_chunks(clip, 4, limits=SMALL):
            kept += chunk.frames

    assert refused.value.http_status == 413
    assert refused.value.details == {"limit": "max_frame_pixels", "value": value, "max": 64 * 64, "frame": 12}
    assert [frame.shape for frame in kept] == [(64, 64, 3)] * 12


# Decode a file in a fresh process and say how much its peak RSS grew: PyAV's RGB arrays are views of buffers
# FFmpeg allocates, which tracemalloc does not see (a 12 MB frame traces as 1 KB), so the process's memory it is.
PEAK_RSS = r"""
import inspect, json, resource, sys
from pathlib import Path
from deployments.video.frames import read_chunks
from deployments.video.probe import VideoLimits

def rss_kib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

limits = {"limits": VideoLimits(max_frame_pixels=int(sys.argv[2]))}
if "limits" not in inspect.signature(read_chunks).parameters:  # a tree before the fix: the same file, unbounded
    limits = {}
before, outcome = rss_kib(), "decoded"
try:
    for chunk in read_chunks(Path(sys.argv[1]), 16, **limits):
        pass
except Exception as exc:
    outcome = getattr(exc, "code", type(exc).__name__)
print(json.dumps({"outcome": outcome, "growth_mib": (rss_kib() - before) / 1024}))
"""


def test_frames_that_grow_mid_stream_cost_no_memory_past_the_first_oversized_one(tmp_path):
    """16 frames of 1024² after 12 small ones: before the fix, 16-frame chunks of them (3 MiB each as RGB, FFmpeg's
    own frames beside them) grew the process by 56.5 MiB, now 5 MiB (the decoder's threads); a 6000² frame of the
    report's file is 108 MiB as RGB."""
    clip = write_mkv(tmp_path / "grows.mkv", [(64, 64, 12), (1024, 1024, 16)])

    run = subprocess.run(
        [sys.executable, "-c", PEAK_RSS, str(clip), str(64 * 64)], cwd=ROOT, capture_output=True, text=True
    )

    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["outcome"] == "video_too_large"
    assert report["growth_mib"] < 12, report


def test_a_frame_that_changes_size_within_the_limit_is_scaled_to_the_stream_size(tmp_path):
    clip = write_mkv(tmp_path / "changes.mkv", [(64, 64, 4), (48, 80, 4)])

    frames = _frames(clip, VideoLimits(), chunk_frames=3)

    assert [frame.shape for frame in frames] == [(64, 64, 3)] * 8  # one size per chunk and per video


def test_a_header_that_understates_the_frames_is_refused_at_max_frames_as_they_decode(tmp_path):
    """The header says 1 s (25 frames at 25 fps); the file holds 300 frames."""
    clip = claim_duration(write_mkv(tmp_path / "lies.mkv", [(16, 16, 300)]), 1.0)
    limits = VideoLimits(max_frames=100)
    info = probe_video(clip, limits)
    assert (info.frames, info.duration_s) == (25, 1.0)

    decoded = []
    with pytest.raises(VideoTooLarge) as refused:
        for chunk in read_chunks(clip, 16, limits=limits):
            decoded += chunk.frames

    assert refused.value.details == {"limit": "max_frames", "value": 101, "max": 100, "frame": 100}
    assert len(decoded) == 96  # the six whole chunks before the 101st frame; nothing after it was decoded


def test_a_header_that_understates_the_length_is_refused_at_max_duration_s_as_it_decodes(tmp_path):
    clip = claim_duration(write_mkv(tmp_path / "lies.mkv", [(16, 16, 300)]), 1.0)  # 12 s of frames
    limits = VideoLimits(max_duration_s=5.0)
    assert probe_video(clip, limits).duration_s == 1.0

    with pytest.raises(VideoTooLarge) as refused:
        _frames(clip, limits)

    assert refused.value.details == {"limit": "max_duration_s", "value": 5.04, "max": 5.0, "frame": 126}


def test_a_video_stream_with_no_decodable_frame_is_a_400_corrupt_video(tmp_path):
    """Every packet garbage (the container intact): before, no chunk at all and the join failed as our 500."""
    clip = damage_packets(write_mkv(tmp_path / "ok.mkv", [(32, 32, 10)]), "video", from_packet=0)
    assert probe_video(clip, VideoLimits()).frames == 10

    with pytest.raises(CorruptVideo, match="no frame we can decode"):
        _frames(clip, VideoLimits())


@pytest.mark.parametrize(
    ("video", "audio", "codec"),
    [("ffv1", None, "ffv1"), ("mjpeg", "mp2", "mp2")],
    ids=["video codec", "audio codec"],
)
def test_codecs_outside_the_allow_list_are_a_415_unsupported_video_naming_them(tmp_path, video, audio, codec):
    clip = tmp_path / "clip.mkv"
    with av.open(str(clip), "w", format="matroska") as out:
        stream = out.add_stream(video, rate=25)
        stream.width, stream.height = 32, 32
        stream.pix_fmt = "yuvj420p" if video == "mjpeg" else "yuv420p"
        sound = out.add_stream(audio, rate=48000) if audio else None
        frame = av.VideoFrame.from_ndarray(np.zeros((32, 32, 3), np.uint8), format="rgb24")
        out.mux(stream.encode(frame.reformat(format=stream.pix_fmt)))
        out.mux(stream.encode(None))
        if sound is not None:
            samples = av.AudioFrame.from_ndarray(np.zeros((1, 2304), np.int16), format="s16", layout="stereo")
            samples.sample_rate = 48000
            out.mux(sound.encode(samples))
            out.mux(sound.encode(None))

    with pytest.raises(UnsupportedVideo) as refused:
        probe_video(clip, VideoLimits())

    assert refused.value.http_status == 415
    assert refused.value.details["codec"] == codec
    assert codec in refused.value.message


def test_decoding_stops_at_the_checkpoint_between_packets(tmp_path):
    """The job's deadline is checked inside the worker thread, between packets, not only between chunks."""
    clip = write_mkv(tmp_path / "clip.mkv", [(16, 16, 40)])
    packets = 0

    def deadline() -> None:
        nonlocal packets
        packets += 1
        if packets > 5:
            raise RequestTimeout("past the deadline")

    with pytest.raises(RequestTimeout):
        _frames(clip, VideoLimits(), chunk_frames=16, checkpoint=deadline)

    assert packets == 6  # stopped within the first chunk
