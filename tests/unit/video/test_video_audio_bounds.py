"""The result's audio is bounded by its decoded video (#32): a track far longer than the video is cut at the video's
end (copied AAC and re-encoded PCM alike), a rate AAC does not take (192 kHz PCM) is resampled instead of failing as
our 500, a damaged track is the caller's 400, and the join stops at the job's deadline."""

from __future__ import annotations

from pathlib import Path

import av
import pytest

from deployments.common.errors import CorruptVideo, RequestTimeout
from deployments.video.frames import assemble, encode_segment, read_chunks
from deployments.video.probe import VideoLimits, probe_video
from tests.unit.video.crafted import write_mkv, write_torn_pcm

AAC_FRAME_S = 1024 / 48000  # copied AAC is cut at a packet: one AAC frame at most past the video's end


def _segments(source: Path, tmp_path: Path) -> list[Path]:
    info = probe_video(source, VideoLimits())
    segments = []
    for chunk in read_chunks(source, 4):
        segments.append(tmp_path / f"segment{chunk.index}.mp4")
        encode_segment(chunk, chunk.frames, info.fps, segments[-1])
    return segments


def _join(source: Path, tmp_path: Path, **options) -> dict[str, tuple[str, int, float]]:
    out = tmp_path / "out.mp4"
    assemble(_segments(source, tmp_path), source, 0, out, **options)
    with av.open(str(out)) as container:
        return {
            s.type: (s.codec_context.name, getattr(s.codec_context, "sample_rate", 0), float(s.duration * s.time_base))
            for s in container.streams
        }


@pytest.mark.parametrize("codec", ["aac", "pcm_s16le"], ids=["copied AAC", "re-encoded PCM"])
def test_audio_far_longer_than_the_video_is_cut_at_the_video_end(tmp_path, codec):
    """2 frames (0.08 s) of video and 20 s of audio: before, the result held all 20 s."""
    source = write_mkv(tmp_path / "long-audio.mkv", [(32, 32, 2)], audio=(codec, 48000, 20.0))

    streams = _join(source, tmp_path)

    assert streams["video"][2] == pytest.approx(0.08)
    assert streams["audio"][0] == "aac"
    assert 0.08 - AAC_FRAME_S <= streams["audio"][2] <= 0.08 + AAC_FRAME_S


def test_a_192_khz_pcm_track_is_resampled_to_48_khz_aac(tmp_path):
    """AAC takes 96 kHz at most: before, opening the encoder failed (our 500, ``internal_error``, after retries)."""
    source = write_mkv(tmp_path / "192k.mkv", [(32, 32, 5)], audio=("pcm_s16le", 192_000, 0.2))

    streams = _join(source, tmp_path)

    assert streams["audio"][:2] == ("aac", 48000)
    assert streams["audio"][2] == pytest.approx(0.2, abs=AAC_FRAME_S)


def test_a_damaged_audio_track_is_a_400_corrupt_video_not_our_500(tmp_path):
    source = write_torn_pcm(tmp_path / "torn.mkv")

    with pytest.raises(CorruptVideo, match="audio track cannot be decoded") as refused:
        _join(source, tmp_path)

    assert (refused.value.http_status, refused.value.code) == (400, "corrupt_video")


def test_the_join_stops_at_the_checkpoint_between_packets(tmp_path):
    source = write_mkv(tmp_path / "clip.mkv", [(32, 32, 12)], audio=("aac", 48000, 0.5))
    segments = _segments(source, tmp_path)
    calls = 0

    def deadline() -> None:
        nonlocal calls
        calls += 1
        if calls > 3:
            raise RequestTimeout("past the deadline")

    with pytest.raises(RequestTimeout):
        assemble(segments, source, 0, tmp_path / "out.mp4", checkpoint=deadline)

    assert calls == 4
