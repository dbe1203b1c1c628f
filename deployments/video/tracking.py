"""Faces followed from frame to frame, their landmarks smoothed along each track, so aligned crops (and the faces
pasted back) do not jitter, and a face that appears or leaves fades in or out instead of popping.

Detections (every ``detect_every`` frames) are matched to tracks by box overlap; between detections a track moves at
its last velocity. The landmarks are smoothed in two parts: their centroid by double exponential smoothing (Holt's
level and trend: a moving face is followed without lag, its noise averaged out), and their shape around it (what
jitters most: each point's own noise, and it changes slowly) by a One-Euro low-pass (Casiez et al., CHI 2012). On the
test clip (a face crossing 640 px in 4 s while zooming) the eye positions' jitter drops 3.7x (bench/bench_video.py
jitter). A crop that lags a little would be harmless anyway: the face is cut out and pasted back through the same
matrix, so it stays where it is in the frame.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from deployments.faces.types import Face


@dataclass(frozen=True)
class TrackingOptions:
    detect_every: int = 1  # run the face analyzer on every k-th frame; track in between
    min_iou: float = 0.3  # a detection continues a track when their boxes overlap at least this much
    fade_frames: int = 4  # frames over which a new face fades in and a lost one fades out
    level_gain: float = 0.3  # Holt, the landmarks' centroid: weight of each new position (lower = steadier)
    trend_gain: float = 0.02  # Holt, the centroid's velocity: weight of each new step (lower = steadier)
    shape_cutoff_hz: float = 0.15  # One-Euro, the landmarks around their centroid (no speed term)
    derivative_cutoff_hz: float = 1.0
    smooth: bool = True


@dataclass(frozen=True, eq=False)
class TrackedFace:
    """A face in one frame: its track, smoothed landmarks ``(5, 2)``, box, and ``opacity`` 0..1 (fade in/out)."""

    track_id: int
    landmarks: np.ndarray
    box: tuple[float, float, float, float]
    opacity: float


class OneEuroFilter:
    """One-Euro filter over an array of coordinates, sampled at ``rate_hz``."""

    def __init__(self, rate_hz: float, min_cutoff_hz: float, beta: float, derivative_cutoff_hz: float) -> None:
        self._rate_hz, self._min_cutoff_hz, self._beta, self._d_cutoff_hz = (
            rate_hz,
            min_cutoff_hz,
            beta,
            derivative_cutoff_hz,
        )
        self._value: np.ndarray | None = None
        self._derivative: np.ndarray | None = None

    def _alpha(self, cutoff_hz: np.ndarray | float) -> np.ndarray | float:
        tau = 1.0 / (2.0 * math.pi * cutoff_hz)
        return 1.0 / (1.0 + tau * self._rate_hz)

    def state(self) -> dict[str, Any]:
        return {"value": _listed(self._value), "derivative": _listed(self._derivative)}

    def load_state(self, state: dict[str, Any]) -> None:
        self._value, self._derivative = _array(state["value"]), _array(state["derivative"])

    def __call__(self, value: np.ndarray) -> np.ndarray:
        value = np.asarray(value, np.float64)
        if self._value is None:
            self._value, self._derivative = value.copy(), np.zeros_like(value)
            return value.copy()
        derivative = (value - self._value) * self._rate_hz
        a_d = self._alpha(self._d_cutoff_hz)
        self._derivative = a_d * derivative + (1 - a_d) * self._derivative
        cutoff = self._min_cutoff_hz + self._beta * np.abs(self._derivative)
        a = self._alpha(cutoff)
        self._value = a * value + (1 - a) * self._value
        return self._value.copy()


@dataclass(eq=False)
class _Track:
    track_id: int
    landmarks: np.ndarray  # smoothed, (5, 2)
    box: np.ndarray  # (4,)
    velocity: np.ndarray  # per frame, (5, 2)
    smoother: LandmarkSmoother
    seen: int = 1  # frames since it appeared (fade in)
    missing: int = 0  # frames since a detection last matched it (fade out)
    raw: np.ndarray = field(default_factory=lambda: np.zeros((5, 2)))


class HoltFilter:
    """Double exponential smoothing (level and trend) of an array of coordinates: no lag at constant velocity."""

    def __init__(self, level_gain: float, trend_gain: float) -> None:
        self._level_gain, self._trend_gain = level_gain, trend_gain
        self._level: np.ndarray | None = None
        self._trend: np.ndarray | None = None

    def state(self) -> dict[str, Any]:
        return {"level": _listed(self._level), "trend": _listed(self._trend)}

    def load_state(self, state: dict[str, Any]) -> None:
        self._level, self._trend = _array(state["level"]), _array(state["trend"])

    def __call__(self, value: np.ndarray) -> np.ndarray:
        value = np.asarray(value, np.float64)
        if self._level is None:  # first sample: the level; second: the first step is the trend
            self._level = value.copy()
            return value.copy()
        if self._trend is None:
            self._level, self._trend = value.copy(), value - self._level
            return value.copy()
        previous = self._level
        self._level = self._level_gain * value + (1 - self._level_gain) * (self._level + self._trend)
        self._trend = self._trend_gain * (self._level - previous) + (1 - self._trend_gain) * self._trend
        return self._level.copy()


class LandmarkSmoother:
    """Five landmarks smoothed as centroid (level and trend) plus shape around it (a steady low-pass)."""

    def __init__(self, rate_hz: float, options: TrackingOptions) -> None:
        o = options
        self._centroid = HoltFilter(o.level_gain, o.trend_gain)
        self._shape = OneEuroFilter(rate_hz, o.shape_cutoff_hz, 0.0, o.derivative_cutoff_hz)

    def state(self) -> dict[str, Any]:
        return {"centroid": self._centroid.state(), "shape": self._shape.state()}

    def load_state(self, state: dict[str, Any]) -> None:
        self._centroid.load_state(state["centroid"])
        self._shape.load_state(state["shape"])

    def __call__(self, landmarks: np.ndarray) -> np.ndarray:
        centroid = landmarks.mean(axis=0)
        return self._centroid(centroid) + self._shape(landmarks - centroid)


class FaceTracker:
    """Tracks across the frames of one video, in order. ``step`` takes a frame's detections (None on a frame without
    detection) and returns the faces to process in that frame."""

    def __init__(self, fps: float, options: TrackingOptions) -> None:
        self._fps, self._options = fps, options
        self._tracks: list[_Track] = []
        self._next_id = 0

    @property
    def options(self) -> TrackingOptions:
        return self._options

    @property
    def tracks_started(self) -> int:
        return self._next_id

    def state(self) -> dict[str, Any]:
        """Everything needed to continue after a chunk boundary in another process (JSON-ready)."""
        return {
            "next_id": self._next_id,
            "tracks": [
                {
                    "track_id": t.track_id,
                    "landmarks": _listed(t.landmarks),
                    "box": _listed(t.box),
                    "velocity": _listed(t.velocity),
                    "raw": _listed(t.raw),
                    "seen": t.seen,
                    "missing": t.missing,
                    "smoother": t.smoother.state(),
                }
                for t in self._tracks
            ],
        }

    @classmethod
    def from_state(cls, fps: float, options: TrackingOptions, state: dict[str, Any]) -> FaceTracker:
        tracker = cls(fps, options)
        tracker._next_id = int(state["next_id"])
        for saved in state["tracks"]:
            smoother = LandmarkSmoother(fps, options)
            smoother.load_state(saved["smoother"])
            tracker._tracks.append(
                _Track(
                    int(saved["track_id"]),
                    _array(saved["landmarks"]),
                    _array(saved["box"]),
                    _array(saved["velocity"]),
                    smoother,
                    seen=int(saved["seen"]),
                    missing=int(saved["missing"]),
                    raw=_array(saved["raw"]),
                )
            )
        return tracker

    def is_detection_frame(self, frame_number: int) -> bool:
        return frame_number % self._options.detect_every == 0

    def step(self, detections: Sequence[Face] | None) -> list[TrackedFace]:
        if detections is None:
            for track in self._tracks:
                self._advance(track, track.raw + track.velocity, matched=True)
        else:
            self._match(detections)
        self._tracks = [track for track in self._tracks if track.missing <= self._options.fade_frames]
        return [self._face_of(track) for track in self._tracks if self._opacity(track) > 0]

    def _match(self, detections: Sequence[Face]) -> None:
        pairs = sorted(
            (
                (_iou(track.box, np.asarray(face.box, np.float64)), t, d)
                for t, track in enumerate(self._tracks)
                for d, face in enumerate(detections)
            ),
            key=lambda pair: -pair[0],
        )
        used_tracks: set[int] = set()
        used_faces: set[int] = set()
        for iou, t, d in pairs:
            if iou < self._options.min_iou or t in used_tracks or d in used_faces:
                continue
            used_tracks.add(t)
            used_faces.add(d)
            self._advance(
                self._tracks[t],
                np.asarray(detections[d].landmarks, np.float64),
                matched=True,
                box=np.asarray(detections[d].box, np.float64),
            )
        for t, track in enumerate(self._tracks):
            if t not in used_tracks:
                track.missing += 1
                track.seen += 1
        for d, face in enumerate(detections):
            if d not in used_faces:
                self._start(face)

    def _start(self, face: Face) -> None:
        landmarks = np.asarray(face.landmarks, np.float64)
        smoother = LandmarkSmoother(self._fps, self._options)
        self._tracks.append(
            _Track(
                self._next_id,
                smoother(landmarks),
                np.asarray(face.box, np.float64),
                np.zeros((5, 2)),
                smoother,
                raw=landmarks,
            )
        )
        self._next_id += 1

    def _advance(self, track: _Track, landmarks: np.ndarray, *, matched: bool, box: np.ndarray | None = None) -> None:
        track.velocity = landmarks - track.raw
        track.raw = landmarks
        smoothed = track.smoother(landmarks) if self._options.smooth else landmarks
        shift = smoothed.mean(axis=0) - track.landmarks.mean(axis=0)
        track.landmarks = smoothed
        track.box = box if box is not None else track.box + np.tile(shift, 2)
        track.seen += 1
        if matched:
            track.missing = 0

    def _opacity(self, track: _Track) -> float:
        fade = self._options.fade_frames
        if fade <= 0:
            return 1.0 if track.missing == 0 else 0.0
        rise = min(1.0, track.seen / fade)
        fall = max(0.0, 1.0 - track.missing / fade)
        return min(rise, fall)

    def _face_of(self, track: _Track) -> TrackedFace:
        return TrackedFace(
            track.track_id,
            track.landmarks.astype(np.float32),
            tuple(float(v) for v in track.box),
            self._opacity(track),
        )


def _listed(array: np.ndarray | None) -> list | None:
    return None if array is None else np.asarray(array, np.float64).tolist()


def _array(values: list | None) -> np.ndarray | None:
    return None if values is None else np.asarray(values, np.float64)


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    x1, y1 = max(a[0], b[0]), max(a[1], b[1])
    x2, y2 = min(a[2], b[2]), min(a[3], b[3])
    inter = max(0.0, x2 - x1) * max(0.0, y2 - y1)
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return float(inter / union) if union > 0 else 0.0
