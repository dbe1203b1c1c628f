"""Text watermark tiled across a finished photo, with HivisionIDPhotos' options (``text``, ``size``, ``opacity``,
``angle``, ``color``, ``space``) and its striped style: rows of the text, every other row shifted by half a step,
rotated ``angle`` degrees counter-clockwise about the photo's centre, blended at ``opacity``.

Chinese text needs a CJK font. The first font found in ``FONT_CANDIDATES`` is used (Debian's ``fonts-noto-cjk``
first, which CI and the Docker image install); without one, DejaVu or Pillow's built-in font draws what it can and the
outcome says which font drew the text, so a missing font is visible instead of silent.
"""

from __future__ import annotations

import functools
import logging
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from deployments.idphoto.background import BAND_ROWS

logger = logging.getLogger(__name__)

FONT_CANDIDATES = (
    "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",
    "/usr/share/fonts/opentype/noto/NotoSerifCJK-Regular.ttc",
    "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc",
    "/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc",
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
)
BUILTIN_FONT = "pillow-builtin"
NO_GLYPH = "\U0010fffd"  # a private-use code point no font draws


@dataclass(frozen=True)
class Watermark:
    """What to draw: sizes in output pixels, ``opacity`` in [0, 1], ``angle_deg`` counter-clockwise."""

    text: str
    size_px: int = 20
    opacity: float = 0.5
    angle_deg: float = 30.0
    colour_rgb: tuple[int, int, int] = (0, 0, 0)
    space_px: int = 25


@dataclass(frozen=True)
class WatermarkedPhoto:
    """The marked photo, the font that drew it and the characters it has no glyph for (drawn as boxes)."""

    rgb: np.ndarray
    font: str
    missing_glyphs: str = ""

    @property
    def note(self) -> str:
        note = f"watermark drawn with {self.font} (the report judges the photo without it)"
        if self.missing_glyphs:
            note += f"; it has no glyphs for {self.missing_glyphs!r} (install fonts-noto-cjk on the server)"
        return note


def draw_watermark(rgb: np.ndarray, mark: Watermark, *, band_rows: int = BAND_ROWS) -> WatermarkedPhoto:
    """``rgb`` (HxWx3 uint8) with ``mark`` tiled over it; opacity 0 returns ``rgb`` itself. The text's coverage is
    drawn in uint8 and blended ``band_rows`` rows at a time (float32 only for a band, never for the photo)."""
    font_name, font = load_font(mark.size_px)
    missing = missing_glyphs(font, mark.text)
    if mark.opacity <= 0:
        return WatermarkedPhoto(rgb, font_name, missing)
    coverage = _tiled_coverage(rgb.shape[1], rgb.shape[0], mark, font)
    colour = np.asarray(mark.colour_rgb, dtype=np.float32)
    marked = np.empty_like(rgb)
    for top in range(0, rgb.shape[0], band_rows):
        bottom = min(rgb.shape[0], top + band_rows)
        weight = (coverage[top:bottom].astype(np.float32) * (1.0 / 255.0))[..., None] * np.float32(mark.opacity)
        mixed = rgb[top:bottom].astype(np.float32) * (1.0 - weight) + colour * weight
        marked[top:bottom] = np.clip(mixed + 0.5, 0, 255).astype(np.uint8)
    return WatermarkedPhoto(marked, font_name, missing)


def missing_glyphs(font, text: str) -> str:
    """The characters of ``text`` that ``font`` draws as its "no glyph" box (the mask of a private-use code point)."""
    notdef = _glyph_pixels(font, NO_GLYPH)
    return "".join(ch for ch in dict.fromkeys(text) if not ch.isspace() and _glyph_pixels(font, ch) == notdef)


def _glyph_pixels(font, char: str) -> bytes:
    left, top, right, bottom = font.getbbox(char)
    canvas = Image.new("L", (max(1, right - left), max(1, bottom - top)), 0)
    ImageDraw.Draw(canvas).text((-left, -top), char, fill=255, font=font)
    return canvas.tobytes()


def _tiled_coverage(width: int, height: int, mark: Watermark, font) -> np.ndarray:
    """Uint8 HxW, 0..255: how much of each pixel the rotated, tiled text covers."""
    left, top, right, bottom = font.getbbox(mark.text)
    stamp_w, stamp_h = max(1, right - left), max(1, bottom - top)
    stamp = Image.new("L", (stamp_w, stamp_h), 0)
    ImageDraw.Draw(stamp).text((-left, -top), mark.text, fill=255, font=font)
    side = int(math.ceil(math.hypot(width, height))) + 2
    tiles = Image.new("L", (side, side), 0)
    step_x, step_y = stamp_w + mark.space_px, stamp_h + mark.space_px
    for row, y in enumerate(range(0, side, step_y)):
        for x in range(-(step_x // 2) * (row % 2), side, step_x):
            tiles.paste(stamp, (x, y))
    rotated = tiles.rotate(mark.angle_deg, resample=Image.Resampling.BILINEAR)
    offset_x, offset_y = (side - width) // 2, (side - height) // 2
    window = rotated.crop((offset_x, offset_y, offset_x + width, offset_y + height))
    return np.asarray(window)


@functools.lru_cache(maxsize=32)
def load_font(size_px: int) -> tuple[str, ImageFont.FreeTypeFont | ImageFont.ImageFont]:
    """The first installed candidate at ``size_px``, else Pillow's built-in font; with the name that drew."""
    for path in FONT_CANDIDATES:
        if Path(path).is_file():
            return Path(path).name, ImageFont.truetype(path, size=size_px)
    logger.warning("no TrueType font among %s: watermarks use Pillow's built-in font (Latin only)", FONT_CANDIDATES)
    return BUILTIN_FONT, ImageFont.load_default(size=size_px)
