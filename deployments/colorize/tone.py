"""Is a photo black-and-white (gray or toned: sepia, cyanotype, selenium)? What ``colorize: auto`` asks.

A monochrome print, scanned, has one hue: none for gray, the toner's for a toned print (whose chroma rises and falls
with lightness while its hue stays). A colour photo, even a faded one, has several (a face and a wall). So: take the
photo's median ``(a, b)`` in CIELAB as its tint, and measure how far pixels lie off the line from neutral gray through
that tint (the part of their colour no toning explains). The photo is monochrome when the 99th percentile of that
distance is under ``MONOCHROME_MAX_STRAY``. Mid-tones only (10 < L < 90): a digital sepia clips its highlights, which
bends their hue toward yellow, and deep shadows carry little colour anyway. Measured on gray, toned, noisy and
JPEG-compressed versions of colour photos and on faded colour photos (``bench/bench_monochrome.py``; the figures are
in docs/BENCHMARKS.md): every monochrome version reads ≤ 5.8, every colour photo ≥ 9.0.

Images are ``(H, W, 3)`` uint8 RGB.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

MONOCHROME_MAX_STRAY = 7.0  # CIELAB a/b units; see the module docstring
WORK_SIDE_PX = 256  # measured on a downscaled copy: fast, and scanner noise averages out
MID_TONES = (10.0, 90.0)  # L range measured
MIN_MID_TONE_SHARE = 0.01  # below this share of mid-tone pixels, every pixel is measured
STRAY_PERCENTILE = 99.0


@dataclass(frozen=True)
class ToneReading:
    """``stray``: the 99th-percentile distance (a/b units) of a mid-tone pixel's colour from the tint line;
    ``tint``: the photo's median ``(a, b)`` (about 0 for gray, positive a and b for sepia)."""

    stray: float
    tint: tuple[float, float]

    @property
    def monochrome(self) -> bool:
        return self.stray < MONOCHROME_MAX_STRAY

    def to_json(self) -> dict[str, object]:
        return {"monochrome": self.monochrome, "stray": round(self.stray, 2), "tint": [round(v, 2) for v in self.tint]}


def read_tone(rgb: np.ndarray) -> ToneReading:
    """Measure how far ``rgb``'s colours lie off its tint line (see the module docstring)."""
    height, width = rgb.shape[:2]
    scale = min(1.0, WORK_SIDE_PX / max(height, width))
    small = cv2.resize(rgb, (max(1, round(width * scale)), max(1, round(height * scale))), interpolation=cv2.INTER_AREA)
    lab = cv2.cvtColor(small.astype(np.float32) / 255.0, cv2.COLOR_RGB2Lab).reshape(-1, 3)
    mid = (lab[:, 0] > MID_TONES[0]) & (lab[:, 0] < MID_TONES[1])
    ab = lab[mid, 1:] if mid.mean() >= MIN_MID_TONE_SHARE else lab[:, 1:]
    tint = np.median(ab, axis=0)
    length = float(np.hypot(*tint))
    direction = tint / length if length > 1e-6 else np.array([1.0, 0.0], np.float32)
    off_line = np.abs(ab[:, 0] * direction[1] - ab[:, 1] * direction[0])
    return ToneReading(stray=float(np.percentile(off_line, STRAY_PERCENTILE)), tint=(float(tint[0]), float(tint[1])))
