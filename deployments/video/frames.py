"""Frames in, frames out, a bounded chunk at a time: memory per video does not grow with its length.

Decoding yields upright RGB frames (the source's display rotation applied); each processed chunk is encoded on its
own as an H.264 segment (no B-frames, so segments join without re-encoding); ``assemble`` joins the segments in order
with the source's audio (copied when it is AAC, re-encoded to AAC otherwise) into one MP4 with ``+faststart`` and the
source's display rotation.

What is decoded is held to the request's limits, not to what the header said (``probe.py`` checked that): every
frame's size against ``max_frame_pixels`` before it is converted or kept (the decoder itself refuses to allocate one
over twice the limit), frames and presentation time as they come against ``max_frames`` and ``max_duration_s``; a
frame that changes size mid-stream is scaled to the stream's size. The audio ends where the decoded video ends (cut,
never longer), resampled to a rate and layout AAC takes when it is re-encoded. FFmpeg errors on the caller's bytes
(demuxing, decoding the source) are 4xx ``corrupt_video``; on ours (encoding, muxing the output) they stay 500s.
``checkpoint`` is called between packets, in the worker thread: it raises to stop the work (the job's deadline).
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from deployments.common.errors import CorruptVideo
from deployments.video.probe import VideoLimits, frame_rate, too_large

# Quality of each segment: visually lossless for restored faces; no B-frames so segments concatenate cleanly.
X264_OPTIONS = {"crf": "18", "preset": "veryfast"}
# The decoder refuses to allocate a frame over this many times ``max_frame_pixels`` (FFmpeg's ``max_pixels``, which
# it checks on the width rounded up to its stride alignment, up to 64 px: 2× leaves room for every width ≥ 64 px);
# frames between the limit and that are decoded and refused by the check here, which names their size.
DECODER_PIXELS_FACTOR = 2

Checkpoint = Callable[[], None]


def no_checkpoint() -> None:
    """Never stops the work (no deadline)."""


@dataclass(frozen=True, eq=False)
class FrameChunk:
    """``frames`` (upright RGB uint8) numbered from ``start_frame``; ``rotation_deg``: the source's display rotation
    (counter-clockwise, as PyAV reports it), undone on encode."""

    index: int
    start_frame: int
    frames: list[np.ndarray]
    rotation_deg: int


def read_chunks(
    path: Path,
    chunk_frames: int,
    *,
    first_chunk: int = 0,
    limits: VideoLimits | None = None,
    checkpoint: Checkpoint = no_checkpoint,
) -> Iterator[FrameChunk]:
    """Decode ``path`` into chunks of ``chunk_frames`` frames; chunks before ``first_chunk`` are decoded and dropped
    (a resumed job), never held. Every decoded frame is held to ``limits`` (``VideoLimits()`` when None): the first
    over one is a 413 ``video_too_large`` naming it; a stream with no decodable frame is a 400 ``corrupt_video``."""
    limits = limits or VideoLimits()
    try:
        with av.open(str(path), metadata_errors="ignore") as container:
            stream = container.streams.video[0]
            stream.thread_type = "AUTO"
            stream.codec_context.options = {"max_pixels": str(limits.max_frame_pixels * DECODER_PIXELS_FACTOR)}
            guard = _FrameGuard(limits, frame_rate(stream), (stream.codec_context.width, stream.codec_context.height))
            frames: list[np.ndarray] = []
            chunk = 0
            rotation = 0
            for number, frame in enumerate(_decode(container, stream, guard, checkpoint)):
                if number == 0:
                    rotation = int(round((frame.rotation or 0) / 90.0)) % 4 * 90
                if chunk >= first_chunk:
                    frames.append(_upright(guard.rgb(frame), rotation))
                if (number + 1) % chunk_frames == 0:
                    if chunk >= first_chunk:
                        yield FrameChunk(chunk, chunk * chunk_frames, frames, rotation)
                    frames, chunk = [], chunk + 1
            if guard.frames == 0:
                raise CorruptVideo("the video stream has no frame we can decode")
            if frames:
                yield FrameChunk(chunk, chunk * chunk_frames, frames, rotation)
    except av.error.FFmpegError as exc:
        raise CorruptVideo(f"the video cannot be decoded: {exc.strerror or exc}") from exc


def _decode(
    container: av.container.InputContainer, stream: av.video.stream.VideoStream, guard: _FrameGuard, check: Checkpoint
) -> Iterator[av.VideoFrame]:
    """The stream's frames, each admitted by ``guard`` before it is yielded; ``check`` before each packet."""
    for packet in container.demux(stream):
        check()
        try:
            decoded = packet.decode()
        except av.error.FFmpegError as exc:
            if exc.errno == errno.EINVAL:  # the decoder refused the frame's size (over max_pixels, or none)
                raise guard.refused_by_decoder() from exc
            raise
        for frame in decoded:
            guard.admit(frame)
            yield frame


class _FrameGuard:
    """Counts the decoded frames and their presentation time, and checks each frame against the limits before it
    is converted to RGB or kept."""

    def __init__(self, limits: VideoLimits, fps: Fraction | None, size: tuple[int, int]) -> None:
        self._limits, self._fps, self._size = limits, fps, size
        self._first_pts: int | None = None
        self.frames = 0

    def admit(self, frame: av.VideoFrame) -> None:
        number, limits = self.frames, self._limits
        pixels = frame.width * frame.height
        if pixels > limits.max_frame_pixels:
            said = f"frame {number} of the video has {frame.width}x{frame.height} px"
            raise too_large("max_frame_pixels", pixels, limits.max_frame_pixels, said, frame=number)
        if number + 1 > limits.max_frames:
            said = f"the video has more than {limits.max_frames} frames"
            raise too_large("max_frames", number + 1, limits.max_frames, said, frame=number)
        time_s = self._time_s(number, frame)
        if time_s > limits.max_duration_s:
            said = f"frame {number} of the video is at {time_s:.2f} s"
            raise too_large("max_duration_s", round(time_s, 3), limits.max_duration_s, said, frame=number)
        self.frames += 1

    def _time_s(self, number: int, frame: av.VideoFrame) -> float:
        """The later of the frame's timestamp from the first frame's and its place at the header's frame rate (the
        output's time: frames are encoded at that rate)."""
        placed = float(number / self._fps) if self._fps else 0.0
        if frame.pts is None or frame.time_base is None:
            return placed
        if self._first_pts is None:
            self._first_pts = frame.pts
        return max(placed, float((frame.pts - self._first_pts) * frame.time_base))

    def refused_by_decoder(self) -> Exception:
        bound = self._limits.max_frame_pixels
        said = f"frame {self.frames} of the video is too large to decode (over {DECODER_PIXELS_FACTOR}× the limit)"
        return too_large("max_frame_pixels", None, bound, said, frame=self.frames)

    def rgb(self, frame: av.VideoFrame) -> np.ndarray:
        """The frame as RGB at the stream's size (a frame that changed size mid-stream is scaled back to it)."""
        width, height = self._size
        if width <= 0 or height <= 0 or (frame.width, frame.height) == (width, height):
            return frame.to_ndarray(format="rgb24")
        return frame.to_ndarray(format="rgb24", width=width, height=height)


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


def assemble(
    segments: Sequence[Path], source: Path, rotation_deg: int, out_path: Path, *, checkpoint: Checkpoint = no_checkpoint
) -> None:
    """Join ``segments`` (in order) with the audio of ``source``, cut at the video's end, into ``out_path``: MP4,
    ``+faststart``."""
    options = {"movflags": "+faststart"}
    end_s = _video_end_s(segments[-1]) if segments else 0.0
    with av.open(str(out_path), "w", format="mp4", options=options) as out, _open_source(source) as audio_in:
        video_out = None
        audio = _AudioTrack(audio_in, out, end_s, checkpoint)
        for segment in segments:
            with av.open(str(segment)) as seg:
                seg_stream = seg.streams.video[0]
                if video_out is None:
                    video_out = out.add_stream_from_template(seg_stream)
                    if rotation_deg:
                        video_out.set_display_rotation(rotation_deg)
                    audio.add_stream()
                for packet in seg.demux(seg_stream):
                    checkpoint()
                    if packet.dts is None:
                        continue
                    packet.stream = video_out
                    out.mux(packet)
                    audio.mux_until(float(packet.pts * packet.time_base))
        audio.mux_until(end_s)
        audio.finish()


def _video_end_s(segment: Path) -> float:
    """When the last frame of the last segment ends (segments' timestamps continue the whole video's)."""
    with av.open(str(segment)) as seg:
        ends = [
            float((packet.pts + (packet.duration or 0)) * packet.time_base)
            for packet in seg.demux(seg.streams.video[0])
            if packet.pts is not None
        ]
    return max(ends, default=0.0)


def _open_source(source: Path) -> av.container.InputContainer:
    try:
        return av.open(str(source), metadata_errors="ignore")
    except av.error.FFmpegError as exc:
        raise CorruptVideo(f"the video cannot be opened: {exc.strerror or exc}") from exc


class _AudioTrack:
    """The source's first audio track into ``out``, ending at ``end_s`` (the video's end): packets copied for AAC
    (those starting before the end), frames re-encoded to AAC otherwise (resampled to a rate and layout AAC takes,
    the last cut to the sample); muxed as the video advances so the two stay interleaved. Errors reading the source
    are the caller's (400 ``corrupt_video``); errors of the encoder and muxer are ours."""

    def __init__(
        self, source: av.container.InputContainer, out: av.container.OutputContainer, end_s: float, check: Checkpoint
    ) -> None:
        self._source, self._out, self._end_s, self._check = source, out, end_s, check
        self._in = source.streams.audio[0] if source.streams.audio else None
        self._stream = None
        self._packets: Iterator[av.Packet] | None = None
        self._copy = self._in is not None and self._in.codec_context.name == "aac"
        self._last_dts: int | None = None
        self._resampler: av.AudioResampler | None = None
        self._samples = 0  # re-encoded samples muxed so far

    def add_stream(self) -> None:
        if self._in is None:
            return
        if self._copy:
            self._stream = self._out.add_stream_from_template(self._in)
        else:
            rate, layout = aac_rate(self._in.codec_context.sample_rate), aac_layout(self._in.codec_context.channels)
            self._stream = self._out.add_stream("aac", rate=rate, layout=layout)
            self._resampler = av.AudioResampler(format="fltp", layout=layout, rate=rate)
        self._packets = self._source.demux(self._in)

    def mux_until(self, time_s: float) -> None:
        """Mux the source's packets up to the first that starts after ``time_s`` (and before the end)."""
        while self._packets is not None:
            packet = self._next_packet()
            if packet is None:
                self.finish()
                return
            if packet.dts is None:
                continue
            start_s = float(packet.pts * packet.time_base) if packet.pts is not None else None
            if self._copy:
                if start_s is not None and start_s >= self._end_s:
                    self.finish()
                    return
                self._mux_copy(packet)
            else:
                for frame in self._decoded(packet):
                    if not self._encode(frame):
                        self.finish()
                        return
            if start_s is not None and start_s > time_s:
                return

    def finish(self) -> None:
        """Stop reading the source; flush the encoder (the resampler's last samples, within the end)."""
        if self._packets is None:
            return
        self._packets = None
        if not self._copy:
            for frame in self._resampler.resample(None):
                if not self._encode_resampled(frame):
                    break
            self._out.mux(self._stream.encode(None))

    def _next_packet(self) -> av.Packet | None:
        self._check()
        try:
            return next(self._packets)
        except StopIteration:
            return None
        except av.error.FFmpegError as exc:
            raise CorruptVideo(f"the audio track cannot be read: {exc.strerror or exc}") from exc

    def _decoded(self, packet: av.Packet) -> list[av.AudioFrame]:
        try:
            return packet.decode()
        except av.error.FFmpegError as exc:
            raise CorruptVideo(f"the audio track cannot be decoded: {exc.strerror or exc}") from exc

    def _mux_copy(self, packet: av.Packet) -> None:
        if self._last_dts is not None and packet.dts <= self._last_dts:
            return  # out of order in the source: the MP4 muxer takes increasing timestamps only
        self._last_dts = packet.dts
        packet.stream = self._stream
        self._out.mux(packet)

    def _encode(self, frame: av.AudioFrame) -> bool:
        """Resample and encode ``frame``; False once the end is reached."""
        frame.pts = None
        try:
            resampled = self._resampler.resample(frame)
        except av.error.FFmpegError as exc:  # a frame of the source the resampler cannot read
            raise CorruptVideo(f"the audio track cannot be converted: {exc.strerror or exc}") from exc
        return all(self._encode_resampled(part) for part in resampled)

    def _encode_resampled(self, frame: av.AudioFrame) -> bool:
        """Encode ``frame`` up to the end (its last samples cut there); False once the end is reached."""
        rate = self._stream.sample_rate
        end = int(round(self._end_s * rate))
        if self._samples >= end:
            return False
        if frame.samples > end - self._samples:
            frame = _first_samples(frame, end - self._samples)
        frame.pts, frame.time_base = self._samples, Fraction(1, rate)
        self._samples += frame.samples
        self._out.mux(self._stream.encode(frame))
        return self._samples < end


def _first_samples(frame: av.AudioFrame, count: int) -> av.AudioFrame:
    """The first ``count`` samples of a planar frame."""
    cut = av.AudioFrame.from_ndarray(
        np.ascontiguousarray(frame.to_ndarray()[:, :count]), format=frame.format.name, layout=frame.layout.name
    )
    cut.sample_rate = frame.sample_rate
    return cut


AAC_RATES = tuple(av.Codec("aac", "w").audio_rates or ())
AAC_FALLBACK_RATE = 48000


def aac_rate(rate: int | None) -> int:
    """The source's sample rate when AAC takes it (96 kHz at most), else 48 kHz (192 kHz PCM is resampled)."""
    return rate if rate in AAC_RATES else AAC_FALLBACK_RATE


def aac_layout(channels: int | None) -> str:
    """Mono stays mono; anything else is stereo (a re-encoded surround track is downmixed)."""
    return "mono" if channels == 1 else "stereo"
