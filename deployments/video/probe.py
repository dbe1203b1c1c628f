"""What a video container says about itself, read from its header before any frame is decoded, and the limits a
request must stay within (duration, frames, pixels per frame, output bytes): a bound reached is a 413 naming it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av

from deployments.common.errors import CorruptVideo, UnsupportedVideo, VideoTooLarge

# Container formats we accept, by the name FFmpeg's demuxer reports (mp4/mov share one demuxer, mkv/webm another).
VIDEO_FORMATS = ("mov", "mp4", "m4a", "3gp", "3g2", "mj2", "matroska", "webm")


# What a video file starts with: an ISO-BMFF ``ftyp`` box (mp4, mov, 3gp) or the EBML magic (mkv, webm).
EBML_MAGIC = b"\x1a\x45\xdf\xa3"


def looks_like_video(head: bytes) -> bool:
    """True when the first bytes are those of a video container (sniffed by content, like images)."""
    if head.startswith(EBML_MAGIC):
        return True
    return len(head) >= 12 and head[4:8] == b"ftyp" and head[8:12] not in (b"avif", b"avis", b"heic", b"heix", b"mif1")


@dataclass(frozen=True)
class VideoLimits:
    """Bounds of one video request; ``max_output_bytes`` is checked on the estimate before work and on the result."""

    max_duration_s: float = 600.0
    max_frames: int = 15_000
    max_frame_pixels: int = 3840 * 2160
    max_output_bytes: int = 2 * 1024**3


@dataclass(frozen=True)
class VideoInfo:
    """The facts of a source video from its header: stored frame size, timing, codecs. (The display rotation is read
    from the first decoded frame: see ``frames.read_chunks``.)"""

    width: int
    height: int
    fps: Fraction
    frames: int
    duration_s: float
    codec: str
    audio_codec: str | None

    def to_json(self) -> dict:
        return {
            "width": self.width,
            "height": self.height,
            "fps": round(float(self.fps), 3),
            "frames": self.frames,
            "duration_s": round(self.duration_s, 3),
            "codec": self.codec,
            "audio_codec": self.audio_codec,
        }


def probe_video(path: Path, limits: VideoLimits) -> VideoInfo:
    """Read the header of the video at ``path`` and check it against ``limits``.

    Raises ``UnsupportedVideo`` (415: not a container we read, no video stream, audio only), ``CorruptVideo`` (400:
    a header FFmpeg cannot parse) or ``VideoTooLarge`` (413, ``details.limit`` naming the bound).
    """
    try:
        container = av.open(str(path), metadata_errors="ignore")
    except av.error.InvalidDataError as exc:
        raise UnsupportedVideo("not a video container we can read (mp4, mov, mkv, webm)") from exc
    except av.error.FFmpegError as exc:
        raise CorruptVideo(f"the video cannot be opened: {exc.strerror or 'unreadable header'}") from exc
    with container:
        if not any(name in VIDEO_FORMATS for name in container.format.name.split(",")):
            raise UnsupportedVideo(f"container {container.format.name!r} is not a video format we read")
        if not container.streams.video:
            raise UnsupportedVideo(
                "the file has no video stream" + (" (audio only)" if container.streams.audio else "")
            )
        stream = container.streams.video[0]
        info = _info_of(container, stream)
    _check(info, limits)
    return info


def _info_of(container: av.container.InputContainer, stream: av.video.stream.VideoStream) -> VideoInfo:
    context = stream.codec_context
    fps = stream.average_rate or stream.guessed_rate or stream.base_rate
    if not fps or fps <= 0 or context.width <= 0 or context.height <= 0:
        raise CorruptVideo("the video stream declares no frame size or frame rate")
    duration_s = _duration_s(container, stream)
    frames = stream.frames or int(round(duration_s * float(fps)))
    if frames <= 0:
        raise CorruptVideo("the video stream declares no frames")
    audio = container.streams.audio[0].codec_context.name if container.streams.audio else None
    return VideoInfo(
        width=context.width,
        height=context.height,
        fps=Fraction(fps),
        frames=frames,
        duration_s=duration_s if duration_s > 0 else frames / float(fps),
        codec=context.name,
        audio_codec=audio,
    )


def _duration_s(container: av.container.InputContainer, stream: av.video.stream.VideoStream) -> float:
    if stream.duration is not None and stream.time_base is not None:
        return float(stream.duration * stream.time_base)
    if container.duration is not None:
        return container.duration / av.time_base
    return 0.0


def _check(info: VideoInfo, limits: VideoLimits) -> None:
    checks = (
        ("max_frame_pixels", info.width * info.height, limits.max_frame_pixels, f"{info.width}x{info.height} px"),
        ("max_duration_s", info.duration_s, limits.max_duration_s, f"{info.duration_s:.1f} s"),
        ("max_frames", info.frames, limits.max_frames, f"{info.frames} frames"),
    )
    for limit, value, bound, said in checks:
        if value > bound:
            raise VideoTooLarge(
                f"the video has {said}, over the limit {limit}={bound:g}",
                details={"limit": limit, "value": value, "max": bound},
            )


def estimate_output_bytes(info: VideoInfo, scale: int) -> int:
    """A generous upper estimate of the H.264 output (0.2 bits per output pixel per frame), checked before work."""
    return int(math.ceil(info.width * info.height * scale * scale * info.frames * 0.2 / 8))
