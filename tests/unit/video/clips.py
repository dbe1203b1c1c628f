"""Test clips made in the test: a real face (``skimage.data.astronaut``) moving and zooming over a textured
background, with a 440 Hz tone on the audio track."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np
from skimage import data


def face_frame(index: int, frames: int, width: int, height: int) -> np.ndarray:
    """Frame ``index``: the astronaut's head crossing the frame left to right while zooming from 0.6 to 1.0, moved
    and scaled by sub-pixel amounts (as a camera sees it), with a little sensor noise (seeded by the frame)."""
    head = _HEAD
    progress = index / max(frames - 1, 1)
    scale = (0.6 + 0.4 * progress) * height / head.shape[0] * 0.8
    x0 = progress * (width - head.shape[1] * scale)
    y0 = (height - head.shape[0] * scale) / 2
    yy, xx = np.mgrid[0:height, 0:width]
    canvas = np.stack([(xx * 3) % 256, (yy * 2) % 256, np.full_like(xx, 90)], axis=-1).astype(np.uint8)
    matrix = np.float32([[scale, 0, x0], [0, scale, y0]])
    cv2.warpAffine(head, matrix, (width, height), dst=canvas, flags=cv2.INTER_AREA, borderMode=cv2.BORDER_TRANSPARENT)
    noise = np.random.default_rng(index).normal(0.0, 3.0, canvas.shape)
    return np.clip(canvas + noise, 0, 255).astype(np.uint8)


_HEAD = data.astronaut()[20:280, 120:360]


def make_clip(
    path: Path,
    *,
    seconds: float = 1.0,
    width: int = 320,
    height: int = 240,
    fps: int = 25,
    audio: str | None = "aac",
    rotation_deg: int = 0,
    container_format: str = "mp4",
    codec: str = "libx264",
) -> Path:
    frames = int(round(seconds * fps))
    with av.open(str(path), "w", format=container_format) as out:
        video = out.add_stream(codec, rate=fps)
        video.width, video.height, video.pix_fmt = width, height, "yuv420p"
        if rotation_deg:
            video.set_display_rotation(rotation_deg)
        sound = out.add_stream(audio, rate=48000) if audio else None
        for index in range(frames):
            frame = av.VideoFrame.from_ndarray(face_frame(index, frames, width, height), format="rgb24")
            frame.pts = index
            frame.time_base = Fraction(1, fps)
            out.mux(video.encode(frame))
        out.mux(video.encode(None))
        if sound is not None:
            samples = int(seconds * 48000)
            t = np.arange(samples) / 48000.0
            tone = (0.3 * np.sin(2 * np.pi * 440.0 * t)).astype(np.float32)[None, :]
            for start in range(0, samples, 1024):
                block = av.AudioFrame.from_ndarray(
                    np.ascontiguousarray(tone[:, start : start + 1024]), format="flt", layout="mono"
                )
                block.sample_rate = 48000
                block.pts = start
                out.mux(sound.encode(block))
            out.mux(sound.encode(None))
    return path


def make_audio_only(path: Path) -> Path:
    """An MP4 holding one AAC track and no video: what a video job must refuse."""
    with av.open(str(path), "w", format="mp4") as out:
        stream = out.add_stream("aac", rate=48000)
        frame = av.AudioFrame.from_ndarray(np.zeros((1, 1024), np.float32), format="flt", layout="mono")
        frame.sample_rate = 48000
        out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    return path
