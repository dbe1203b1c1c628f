"""Hostile MKVs made in the test, tiny and fast: what a caller can send to make a video job decode more than its
header says (frames that grow mid-stream, a header that under-states the length, audio far longer than the video,
audio at a rate AAC does not take, a damaged track). MJPEG packets are whole JPEGs, so packets from encoders of
different sizes can share one stream; the Matroska header's duration is a float that can be rewritten in place."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

FPS = 25
MS = Fraction(1, 1000)  # Matroska's time base (TimecodeScale 1 ms)
DURATION_ID = b"\x44\x89"  # the Segment Info's Duration element (a float, in TimecodeScale units)


def _mjpeg_packets(width: int, height: int, count: int, first: int) -> list[av.Packet]:
    """``count`` JPEGs of ``width``×``height`` (one flat grey per run: small, and made once)."""
    encoder = av.CodecContext.create("mjpeg", "w")
    encoder.width, encoder.height, encoder.pix_fmt = width, height, "yuvj420p"
    encoder.time_base = Fraction(1, FPS)
    rgb = np.full((height, width, 3), (first * 37 + width) % 256, np.uint8)
    frame = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuvj420p")
    packets = []
    for index in range(first, first + count):
        frame.pts, frame.time_base = index, Fraction(1, FPS)
        packets += encoder.encode(frame)
    return packets + encoder.encode(None)


def write_mkv(
    path: Path,
    sizes: Sequence[tuple[int, int, int]],
    *,
    audio: tuple[str, int, float] | None = None,
) -> Path:
    """An MJPEG MKV at 25 fps whose frames are ``sizes`` runs of (width, height, count), the header naming the first
    size; ``audio``: (codec, sample rate, seconds) of a mono 440 Hz tone muxed after the video."""
    with av.open(str(path), "w", format="matroska") as out:
        video = out.add_stream("mjpeg", rate=FPS)
        video.width, video.height, video.pix_fmt = sizes[0][0], sizes[0][1], "yuvj420p"
        sound = out.add_stream(audio[0], rate=audio[1], layout="mono") if audio else None
        number = 0
        for width, height, count in sizes:
            for packet in _mjpeg_packets(width, height, count, number):
                packet.stream = video
                packet.pts = packet.dts = number * 1000 // FPS
                packet.time_base = MS
                out.mux(packet)
                number += 1
        if sound is not None:
            _tone(out, sound, audio[1], audio[2])
    return path


def _tone(out: av.container.OutputContainer, sound: av.audio.stream.AudioStream, rate: int, seconds: float) -> None:
    block = 4096
    sample_format = "s16" if sound.codec_context.name.startswith("pcm_s16") else "fltp"
    total = int(rate * seconds)
    for start in range(0, total, block):
        t = (np.arange(start, min(start + block, total)) / rate)[None, :]
        tone = 0.3 * np.sin(2 * np.pi * 440.0 * t)
        samples = (tone * 32767).astype(np.int16) if sample_format == "s16" else tone.astype(np.float32)
        frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(samples), format=sample_format, layout="mono")
        frame.sample_rate, frame.pts, frame.time_base = rate, start, Fraction(1, rate)
        out.mux(sound.encode(frame))
    out.mux(sound.encode(None))


def claim_duration(path: Path, seconds: float) -> Path:
    """Rewrite the Matroska header's duration in place (the file's frames are untouched): a header that lies."""
    data = bytearray(path.read_bytes())
    at = data.find(DURATION_ID)
    size = data[at + 2]
    if size == 0x88:
        data[at + 3 : at + 11] = struct.pack(">d", seconds * 1000.0)
    elif size == 0x84:
        data[at + 3 : at + 7] = struct.pack(">f", seconds * 1000.0)
    else:
        raise ValueError(f"unexpected Duration element size {size:#x}")
    path.write_bytes(bytes(data))
    return path


def damage_packets(path: Path, stream_type: str, from_packet: int) -> Path:
    """The same file with the payload of every ``stream_type`` packet from ``from_packet`` on overwritten with
    0xFF bytes (the container stays valid: only that track's data is garbage)."""
    with av.open(str(path)) as source:
        wanted = source.streams.video[0] if stream_type == "video" else source.streams.audio[0]
        spans = []
        seen = 0
        for packet in source.demux(wanted):
            if packet.size and packet.pos is not None and packet.pos >= 0:
                if seen >= from_packet:
                    spans.append((packet.pos, packet.size))
                seen += 1
    data = bytearray(path.read_bytes())
    for pos, size in spans:
        data[pos : pos + size] = b"\xff" * size
    damaged = path.with_name(f"{path.stem}-damaged{path.suffix}")
    damaged.write_bytes(bytes(data))
    return damaged


def write_torn_pcm(path: Path, frames: int = 10) -> Path:
    """An MJPEG MKV whose 16-bit PCM track holds, after a few good packets, one of a single byte: half a sample,
    which the PCM decoder refuses (a damaged audio track)."""
    with av.open(str(path), "w", format="matroska") as out:
        video = out.add_stream("mjpeg", rate=FPS)
        video.width, video.height, video.pix_fmt = 32, 32, "yuvj420p"
        sound = out.add_stream("pcm_s16le", rate=8000, layout="mono")
        for number, packet in enumerate(_mjpeg_packets(32, 32, frames, 0)):
            packet.stream = video
            packet.pts = packet.dts = number * 1000 // FPS
            packet.time_base = MS
            out.mux(packet)
        for index, size in enumerate((320, 320, 1, 320)):  # 20 ms of samples each, but one byte in the third
            packet = av.Packet(bytes(size))
            packet.stream = sound
            packet.pts = packet.dts = index * 20
            packet.time_base = MS
            out.mux(packet)
    return path
