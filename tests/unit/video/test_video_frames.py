"""Probing against limits, chunked decode, segment encode and assembly with audio (clips generated here)."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

from deployments.common.errors import CorruptVideo, UnsupportedVideo, VideoTooLarge
from deployments.video.frames import assemble, encode_segment, read_chunks
from deployments.video.probe import VideoLimits, probe_video
from tests.unit.video.clips import face_frame, make_audio_only, make_clip


def _round_trip(source: Path, tmp_path: Path, chunk_frames: int) -> Path:
    info = probe_video(source, VideoLimits())
    segments = []
    for chunk in read_chunks(source, chunk_frames):
        segment = tmp_path / f"segment{chunk.index}.mp4"
        encode_segment(chunk, chunk.frames, info.fps, segment)
        segments.append(segment)
    out = tmp_path / "out.mp4"
    assemble(segments, source, chunk.rotation_deg, out)
    return out


def _streams(path: Path) -> dict[str, tuple[str, float]]:
    with av.open(str(path)) as container:
        return {s.type: (s.codec_context.name, float(s.duration * s.time_base)) for s in container.streams}


def test_probe_reads_size_rate_frames_and_audio_from_the_header(tmp_path):
    info = probe_video(make_clip(tmp_path / "a.mp4", seconds=1.0, width=160, height=96), VideoLimits())
    assert (info.width, info.height, info.fps, info.frames, info.codec, info.audio_codec) == (
        160,
        96,
        25,
        25,
        "h264",
        "aac",
    )
    assert info.duration_s == pytest.approx(1.0, abs=0.05)


@pytest.mark.parametrize(
    ("limits", "limit"),
    [
        (VideoLimits(max_frame_pixels=160 * 96 - 1), "max_frame_pixels"),
        (VideoLimits(max_duration_s=0.5), "max_duration_s"),
        (VideoLimits(max_frames=24), "max_frames"),
    ],
)
def test_a_video_over_a_limit_is_a_413_naming_the_limit_before_any_decoding(tmp_path, limits, limit):
    clip = make_clip(tmp_path / "a.mp4", seconds=1.0, width=160, height=96)
    with pytest.raises(VideoTooLarge) as raised:
        probe_video(clip, limits)
    assert raised.value.http_status == 413
    assert raised.value.details["limit"] == limit


def test_audio_only_files_and_non_video_bytes_are_unsupported_and_truncated_files_corrupt(tmp_path):
    audio_only = make_audio_only(tmp_path / "tone.m4a")
    with pytest.raises(UnsupportedVideo, match="no video stream"):
        probe_video(audio_only, VideoLimits())
    text = tmp_path / "notes.mp4"
    text.write_bytes(b"hello, this is not a video" * 40)
    with pytest.raises(UnsupportedVideo):
        probe_video(text, VideoLimits())
    clip = make_clip(tmp_path / "a.mp4", seconds=1.0, width=160, height=96).read_bytes()
    truncated = tmp_path / "truncated.mp4"
    truncated.write_bytes(clip[: len(clip) // 3])
    with pytest.raises((CorruptVideo, UnsupportedVideo)):
        info = probe_video(truncated, VideoLimits())
        for _ in read_chunks(truncated, 8):
            pass
        assert info is None  # unreachable: a third of an mp4 (moov at the end) has no readable stream


def test_chunks_are_bounded_and_cover_every_frame_once(tmp_path):
    clip = make_clip(tmp_path / "a.mp4", seconds=1.0, width=160, height=96)
    chunks = list(read_chunks(clip, 8))
    assert [(c.index, c.start_frame, len(c.frames)) for c in chunks] == [(0, 0, 8), (1, 8, 8), (2, 16, 8), (3, 24, 1)]
    resumed = list(read_chunks(clip, 8, first_chunk=2))
    assert [(c.index, c.start_frame) for c in resumed] == [(2, 16), (3, 24)]
    assert np.array_equal(resumed[0].frames[0], chunks[2].frames[0])


def test_segments_join_into_one_mp4_with_the_same_frames_rate_and_audio_length(tmp_path):
    source = make_clip(tmp_path / "a.mp4", seconds=2.0, width=160, height=96)
    out = _round_trip(source, tmp_path, chunk_frames=16)
    info = probe_video(out, VideoLimits())
    assert (info.width, info.height, info.fps, info.codec, info.audio_codec) == (160, 96, 25, "h264", "aac")
    with av.open(str(out)) as container:
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    assert len(frames) == 50
    streams = _streams(out)
    assert streams["video"][1] == pytest.approx(2.0, abs=0.04)
    assert streams["audio"][1] == pytest.approx(2.0, abs=0.05)
    # the content survives (H.264 at crf 18 twice): frame 30 is still frame 30
    expected = face_frame(30, 50, 160, 96).astype(np.float32)
    assert np.abs(frames[30].astype(np.float32) - expected).mean() < 6.0
    assert np.abs(frames[10].astype(np.float32) - expected).mean() > 12.0


def test_non_aac_audio_is_reencoded_to_aac_and_vp9_webm_becomes_h264_mp4(tmp_path):
    source = make_clip(
        tmp_path / "a.webm",
        seconds=1.0,
        width=160,
        height=96,
        container_format="webm",
        codec="libvpx-vp9",
        audio="libopus",
    )
    streams = _streams(_round_trip(source, tmp_path, chunk_frames=10))
    assert streams["video"][0] == "h264" and streams["audio"][0] == "aac"
    assert streams["audio"][1] == pytest.approx(1.0, abs=0.05)


def test_display_rotation_is_applied_on_decode_and_kept_on_encode(tmp_path):
    source = make_clip(tmp_path / "a.mp4", seconds=0.4, width=160, height=96, rotation_deg=90)
    chunk = next(read_chunks(source, 100))
    assert chunk.rotation_deg == 90 and chunk.frames[0].shape == (160, 96, 3)  # upright: sides swapped
    out = _round_trip(source, tmp_path, chunk_frames=100)
    with av.open(str(out)) as container:
        frame = next(container.decode(video=0))
        assert (frame.width, frame.height, frame.rotation) == (160, 96, 90)


def test_videos_are_sniffed_by_content_and_still_images_are_not(tmp_path, astronaut_rgb):
    from deployments.common.image import encode_image
    from deployments.video.probe import looks_like_video

    for fmt, codec in (("mp4", "libx264"), ("webm", "libvpx-vp9"), ("matroska", "mpeg4")):
        clip = make_clip(
            tmp_path / f"a.{fmt}", seconds=0.2, width=64, height=48, container_format=fmt, codec=codec, audio=None
        )
        assert looks_like_video(clip.read_bytes()[:64]), fmt
    for fmt in ("jpeg", "png", "webp"):
        assert not looks_like_video(encode_image(astronaut_rgb, fmt)[:64]), fmt
    assert not looks_like_video(b"\x00\x00\x00\x1cftypavif" + b"\x00" * 20)  # an AVIF still image
