"""Frames in, frames out, a bounded chunk at a time: memory per video does not grow with its length.

Decoding yields upright RGB frames (the source's display rotation applied); each processed chunk is encoded on its
own as an H.264 segment (no B-frames, so segments join without re-encoding); ``assemble`` joins the segments in order
with the source's audio (copied when it is AAC, re-encoded to AAC otherwise) into one MP4 with ``+faststart`` and the
source's display rotation.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from deployments.common.errors import CorruptVideo

# Quality of each segment: visually lossless for restored faces; no B-frames so segments concatenate cleanly.
X264_OPTIONS = {"crf": "18", "preset": "veryfast"}


@dataclass(frozen=True, eq=False)
class FrameChunk:
    """``frames`` (upright RGB uint8) numbered from ``start_frame``; ``rotation_deg``: the source's display rotation
    (counter-clockwise, as PyAV reports it), undone on encode."""

    index: int
    start_frame: int
    frames: list[np.ndarray]
    rotation_deg: int


def read_chunks(path: Path, chunk_frames: int, *, first_chunk: int = 0) -> Iterator[FrameChunk]:
    """Decode ``path`` into chunks of ``chunk_frames`` frames; chunks before ``first_chunk`` are decoded and dropped
    (a resumed job), never held."""
    try:
        with av.open(str(path), metadata_errors="ignore") as container:
            stream = container.streams.video[0]
            stream.thread_type = "AUTO"
            frames: list[np.ndarray] = []
            chunk = 0
            rotation = 0
            for number, frame in enumerate(container.decode(stream)):
                if number == 0:
                    rotation = int(round((frame.rotation or 0) / 90.0)) % 4 * 90
                if chunk >= first_chunk:
                    frames.append(_upright(frame.to_ndarray(format="rgb24"), rotation))
                if (number + 1) % chunk_frames == 0:
                    if chunk >= first_chunk:
                        yield FrameChunk(chunk, chunk * chunk_frames, frames, rotation)
                    frames, chunk = [], chunk + 1
            if frames:
                yield FrameChunk(chunk, chunk * chunk_frames, frames, rotation)
    except av.error.FFmpegError as exc:
        raise CorruptVideo(f"the video cannot be decoded: {exc.strerror or exc}") from exc


def _upright(rgb: np.ndarray, rotation_deg: int) -> np.ndarray:
    return np.ascontiguousarray(np.rot90(rgb, k=rotation_deg // 90)) if rotation_deg else rgb


def _stored(rgb: np.ndarray, rotation_deg: int) -> np.ndarray:
    return np.ascontiguousarray(np.rot90(rgb, k=-(rotation_deg // 90))) if rotation_deg else rgb


def encode_segment(chunk: FrameChunk, frames: Sequence[np.ndarray], fps: Fraction, path: Path) -> None:
    """Encode one chunk's processed frames as an H.264 MP4 segment whose timestamps continue the whole video's."""
    height, width = _stored(frames[0], chunk.rotation_deg).shape[:2]
    with av.open(str(path), "w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=fps, options=X264_OPTIONS)
        stream.width, stream.height, stream.pix_fmt = _even(width), _even(height), "yuv420p"
        stream.codec_context.max_b_frames = 0
        stream.codec_context.time_base = 1 / fps
        for offset, rgb in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(_pad_even(_stored(rgb, chunk.rotation_deg)), format="rgb24")
            frame.pts = chunk.start_frame + offset
            frame.time_base = 1 / fps
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))


def _even(side_px: int) -> int:
    return side_px + side_px % 2


def _pad_even(rgb: np.ndarray) -> np.ndarray:
    """yuv420p needs even sides: an odd side gets one edge row/column repeated (the output is 1 px larger there)."""
    height, width = rgb.shape[:2]
    if height % 2 == 0 and width % 2 == 0:
        return rgb
    return np.pad(rgb, ((0, height % 2), (0, width % 2), (0, 0)), mode="edge")


def assemble(segments: Sequence[Path], source: Path, rotation_deg: int, out_path: Path) -> None:
    """Join ``segments`` (in order) with the audio of ``source`` into ``out_path``: MP4, ``+faststart``."""
    options = {"movflags": "+faststart"}
    with av.open(str(out_path), "w", format="mp4", options=options) as out, av.open(str(source)) as audio_in:
        video_out = None
        audio = _AudioCopy(audio_in, out)
        for segment in segments:
            with av.open(str(segment)) as seg:
                seg_stream = seg.streams.video[0]
                if video_out is None:
                    video_out = out.add_stream_from_template(seg_stream)
                    if rotation_deg:
                        video_out.set_display_rotation(rotation_deg)
                    audio.add_stream()
                for packet in seg.demux(seg_stream):
                    if packet.dts is None:
                        continue
                    packet.stream = video_out
                    out.mux(packet)
                    audio.mux_until(float(packet.pts * packet.time_base))
        audio.mux_until(float("inf"))


class _AudioCopy:
    """The source's first audio track into ``out``: packets copied for AAC, frames re-encoded to AAC otherwise;
    muxed as the video advances so the two stay interleaved."""

    def __init__(self, source: av.container.InputContainer, out: av.container.OutputContainer) -> None:
        self._source, self._out = source, out
        self._in = source.streams.audio[0] if source.streams.audio else None
        self._stream = None
        self._packets: Iterator[av.Packet] | None = None
        self._copy = self._in is not None and self._in.codec_context.name == "aac"

    def add_stream(self) -> None:
        if self._in is None:
            return
        if self._copy:
            self._stream = self._out.add_stream_from_template(self._in)
        else:
            self._stream = self._out.add_stream("aac", rate=self._in.codec_context.sample_rate or 48000)
        self._packets = self._source.demux(self._in)

    def mux_until(self, time_s: float) -> None:
        if self._packets is None:
            return
        for packet in self._packets:
            if packet.dts is None:
                continue
            if self._copy:
                packet.stream = self._stream
                self._out.mux(packet)
            else:
                for frame in packet.decode():
                    frame.pts = None
                    self._out.mux(self._stream.encode(frame))
            if packet.pts is not None and float(packet.pts * packet.time_base) > time_s:
                return
        if not self._copy:
            self._out.mux(self._stream.encode(None))
        self._packets = None
