"""What a video container says about itself, read from its header before any frame is decoded, and the limits a
request must stay within (duration, frames, pixels per frame, output bytes): a bound reached is a 413 naming it.

A header is the caller's word: the same limits hold again on every decoded frame (``frames.read_chunks``), and the
audio is cut at the decoded video's end (``frames.assemble``).

Codecs are an allow-list (``VIDEO_CODECS``, ``AUDIO_CODECS``, by FFmpeg's codec name): what phones, cameras and
browsers record. FFmpeg carries hundreds of decoders, most of them for formats nobody sends a portrait video in and
each a parser of the caller's bytes; a stream in another codec is a 415 ``unsupported_video`` naming it, before any
of it is decoded. Audio is re-encoded to AAC when it is not AAC already, so every listed audio codec is one we can
turn into AAC (resampled to a rate AAC takes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av

from deployments.common.errors import CorruptVideo, UnsupportedVideo, VideoTooLarge

# Container formats we accept, by the name FFmpeg's demuxer reports (mp4/mov share one demuxer, mkv/webm another).
VIDEO_FORMATS = ("mov", "mp4", "m4a", "3gp", "3g2", "mj2", "matroska", "webm")


# Video codecs we decode: H.264, H.265, AV1, VP8/VP9 (WebM), MPEG-4 Part 2 (older phones), Motion JPEG (cameras,
# webcams), ProRes (iPhone Pro). By FFmpeg's codec name (``Codec.canonical_name``: "av1" whichever decoder runs it).
VIDEO_CODECS = ("h264", "hevc", "av1", "vp8", "vp9", "mpeg4", "mjpeg", "prores")
# Audio codecs we copy (AAC) or decode and re-encode to AAC; any PCM variant too (``pcm_s16le``, ``pcm_f32le``...).
AUDIO_CODECS = ("aac", "mp3", "opus", "vorbis", "flac", "alac", "ac3", "eac3")


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
        _check_codecs(stream, container.streams.audio[0] if container.streams.audio else None)
        info = _info_of(container, stream)
    _check(info, limits)
    return info


def _check_codecs(video: av.video.stream.VideoStream, audio: av.audio.stream.AudioStream | None) -> None:
    codec = _codec_name(video)
    if codec not in VIDEO_CODECS:
        raise UnsupportedVideo(
            f"the video codec {codec!r} is not one we read ({', '.join(VIDEO_CODECS)})",
            details={"codec": codec, "codecs": list(VIDEO_CODECS)},
        )
    if audio is None:
        return
    codec = _codec_name(audio)
    if codec not in AUDIO_CODECS and not codec.startswith("pcm_"):
        raise UnsupportedVideo(
            f"the audio codec {codec!r} is not one we read ({', '.join(AUDIO_CODECS)}, PCM)",
            details={"codec": codec, "codecs": [*AUDIO_CODECS, "pcm_*"]},
        )


def _codec_name(stream: av.stream.Stream) -> str:
    context = stream.codec_context
    return context.codec.canonical_name if context is not None else "unknown"


def frame_rate(stream: av.video.stream.VideoStream) -> Fraction | None:
    """The stream's frame rate as its header says it (the output's rate); None when it says none."""
    rate = stream.average_rate or stream.guessed_rate or stream.base_rate
    return Fraction(rate) if rate and rate > 0 else None


def _info_of(container: av.container.InputContainer, stream: av.video.stream.VideoStream) -> VideoInfo:
    context = stream.codec_context
    fps = frame_rate(stream)
    if fps is None or context.width <= 0 or context.height <= 0:
        raise CorruptVideo("the video stream declares no frame size or frame rate")
    duration_s = _duration_s(container, stream)
    frames = stream.frames or int(round(duration_s * float(fps)))
    if frames <= 0:
        raise CorruptVideo("the video stream declares no frames")
    audio = container.streams.audio[0].codec_context.name if container.streams.audio else None
    return VideoInfo(
        width=context.width,
        height=context.height,
        fps=fps,
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
            raise too_large(limit, value, bound, f"the video has {said}")


def too_large(limit: str, value: float | None, bound: float, said: str, **details: object) -> VideoTooLarge:
    """The 413 of a bound reached: ``said`` what was found, ``details.limit`` naming the bound (``value`` None when
    only the decoder knows it)."""
    facts = {"limit": limit, "value": value, "max": bound, **details}
    return VideoTooLarge(f"{said}, over the limit {limit}={bound:g}", details=facts)


def estimate_output_bytes(info: VideoInfo, scale: int) -> int:
    """A generous upper estimate of the H.264 output (0.2 bits per output pixel per frame), checked before work."""
    return int(math.ceil(info.width * info.height * scale * scale * info.frames * 0.2 / 8))
