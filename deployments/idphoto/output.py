"""Bytes out: the photo at its exact pixel size and DPI, within the caller's KB window, and print sheets.

KB is 1024 bytes (what exam registration sites mean). A JPEG's size is steered only by honest means, quality (binary
search) and chroma subsampling (4:4:4 while there is room, 4:2:0 to shrink); bytes are never padded. When a minimum
cannot be reached even at quality 100 with 4:4:4, the best we can do is returned and the shortfall reported.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, Literal

import cv2
import numpy as np

from deployments.common.admission import IDPHOTO_OUTPUT, MEGAPIXEL, PixelCap
from deployments.common.image import encode_image
from deployments.idphoto.specs import mm_to_px

logger = logging.getLogger(__name__)

KB_BYTES = 1024
DEFAULT_QUALITY = 92
SHEET_QUALITY = 95
SHEET_DPI = 300.0
# Margin and least gap at 300 DPI (scaled to a custom canvas's DPI).
SHEET_MIN_MARGIN_PX = 30
SHEET_MIN_GAP_PX = 20
CUT_LINE_GREY = 200
HD_MIN_SHORT_SIDE_PX = 600
# A custom canvas: A2 at 300 DPI is 34.9 MP; sheets are assembled in memory at 3 bytes per pixel.
SHEET_OUTPUT = PixelCap("a print sheet", 36 * MEGAPIXEL)


@dataclass(frozen=True)
class SheetCanvas:
    """A print sheet, landscape: its pixels at ``dpi``, and the gap between copies when the caller fixed it."""

    size_wh: tuple[int, int]
    dpi: float
    gap_px: int | None = None

    def px(self, px_at_300_dpi: int) -> int:
        return int(round(px_at_300_dpi * self.dpi / SHEET_DPI))


# Landscape at 300 DPI: 4x6 in, 3.5x5 in, A4 (210x297 mm); 3R and 4R are the photo trade's names of 3.5x5 in and
# 4x6 in (the same paper as 5inch and 6inch).
PRESET_SHEETS: dict[str, SheetCanvas] = {
    "6inch": SheetCanvas((1800, 1200), SHEET_DPI),
    "5inch": SheetCanvas((1500, 1050), SHEET_DPI),
    "a4": SheetCanvas((3508, 2480), SHEET_DPI),
    "3r": SheetCanvas((1500, 1050), SHEET_DPI),
    "4r": SheetCanvas((1800, 1200), SHEET_DPI),
}


def custom_canvas(width_mm: float, height_mm: float, dpi: float, gap_mm: float | None) -> SheetCanvas:
    """A caller's canvas (either orientation; copies are laid out whichever way more fit)."""
    width_px, height_px = mm_to_px(width_mm, dpi), mm_to_px(height_mm, dpi)
    SHEET_OUTPUT.admit(width_px, height_px)
    gap_px = None if gap_mm is None else mm_to_px(gap_mm, dpi)
    return SheetCanvas((max(width_px, height_px), min(width_px, height_px)), float(dpi), gap_px)


@dataclass(frozen=True)
class EncodedPhoto:
    """The encoded bytes and how the size target went."""

    data: bytes
    media_type: str
    quality: int | None
    subsampling: str | None
    min_kb: int | None
    max_kb: int | None
    size_ok: bool
    note: str | None

    @property
    def size_kb(self) -> float:
        return len(self.data) / KB_BYTES

    def to_json(self) -> dict[str, Any]:
        return {
            "bytes": len(self.data),
            "size_kb": round(self.size_kb, 2),
            "media_type": self.media_type,
            "quality": self.quality,
            "subsampling": self.subsampling,
            "min_kb": self.min_kb,
            "max_kb": self.max_kb,
            "size_ok": self.size_ok,
            "note": self.note,
        }


@dataclass(frozen=True)
class SheetLayout:
    """Where copies go on a print sheet (all in sheet pixels at the canvas's DPI)."""

    sheet_wh: tuple[int, int]
    photo_wh: tuple[int, int]
    columns: int
    rows: int
    origins: tuple[tuple[int, int], ...]

    @property
    def count(self) -> int:
        return len(self.origins)


def encode_photo(
    rgb: np.ndarray,
    fmt: Literal["jpeg", "png"],
    dpi: float,
    *,
    alpha: np.ndarray | None = None,
    min_kb: int | None = None,
    max_kb: int | None = None,
) -> EncodedPhoto:
    """Encode at ``dpi``; for JPEG, search quality and subsampling to land inside ``[min_kb, max_kb]``."""
    dpi_pair = (float(dpi), float(dpi))
    if fmt == "png":
        return EncodedPhoto(
            encode_image(rgb, "png", alpha=alpha, dpi=dpi_pair), "image/png", None, None, None, None, True, None
        )

    def encode(quality: int, subsampling: str) -> bytes:
        return encode_image(rgb, "jpeg", dpi=dpi_pair, quality=quality, subsampling=subsampling)

    low_bytes = min_kb * KB_BYTES if min_kb is not None else 0
    high_bytes = max_kb * KB_BYTES if max_kb is not None else None

    def fits(data: bytes) -> bool:
        return len(data) >= low_bytes and (high_bytes is None or len(data) <= high_bytes)

    def result(data: bytes, quality: int, subsampling: str, note: str | None = None) -> EncodedPhoto:
        return EncodedPhoto(data, "image/jpeg", quality, subsampling, min_kb, max_kb, fits(data), note)

    data = encode(DEFAULT_QUALITY, "4:4:4")
    if fits(data):
        return result(data, DEFAULT_QUALITY, "4:4:4")
    if high_bytes is not None and len(data) > high_bytes:
        return _shrink(encode, result, high_bytes)
    return _grow(encode, result, low_bytes)


def _shrink(encode, result, high_bytes: int) -> EncodedPhoto:
    """Highest quality that fits under the cap; 4:2:0 is tried when 4:4:4 would need a visibly low quality."""
    best: tuple[int, str, bytes] | None = None
    for subsampling in ("4:4:4", "4:2:0"):
        found = _highest_quality_under(encode, subsampling, high_bytes)
        if found is not None and (best is None or found[0] > best[0]):
            best = (found[0], subsampling, found[1])
        if best is not None and best[0] >= 80:
            break
    if best is None:
        data = encode(1, "4:2:0")
        return result(data, 1, "4:2:0", f"max_kb unreachable: smallest encoding is {len(data) / KB_BYTES:.1f} KB")
    quality, subsampling, data = best
    return result(data, quality, subsampling)


def _grow(encode, result, low_bytes: int) -> EncodedPhoto:
    """Lowest quality at or above the floor (4:4:4); if even quality 100 is too small, say so and never pad."""
    top = encode(100, "4:4:4")
    if len(top) < low_bytes:
        note = (
            f"min_kb unreachable: this image encodes to at most {len(top) / KB_BYTES:.1f} KB "
            f"(quality 100, 4:4:4); bytes are never padded"
        )
        logger.info(note)
        return result(top, 100, "4:4:4", note)
    low_q, high_q, best = DEFAULT_QUALITY + 1, 100, (100, top)
    while low_q <= high_q:
        middle = (low_q + high_q) // 2
        data = encode(middle, "4:4:4")
        if len(data) >= low_bytes:
            best, high_q = (middle, data), middle - 1
        else:
            low_q = middle + 1
    return result(best[1], best[0], "4:4:4")


def _highest_quality_under(encode, subsampling: str, high_bytes: int) -> tuple[int, bytes] | None:
    low_q, high_q, best = 1, DEFAULT_QUALITY - 1, None
    while low_q <= high_q:
        middle = (low_q + high_q) // 2
        data = encode(middle, subsampling)
        if len(data) <= high_bytes:
            best, low_q = (middle, data), middle + 1
        else:
            high_q = middle - 1
    return best


def hd_size(size_wh: tuple[int, int], out_px_per_src_px: float) -> tuple[int, int]:
    """The HD copy's size: the spec's aspect ratio at the source's own detail (one output pixel per source pixel),
    at least ``HD_MIN_SHORT_SIDE_PX`` on the short side, within the ID-photo output cap."""
    factor = hd_factor(size_wh, out_px_per_src_px)
    return (max(1, int(round(size_wh[0] * factor))), max(1, int(round(size_wh[1] * factor))))


def hd_factor(size_wh: tuple[int, int], out_px_per_src_px: float = 1.0) -> float:
    width, height = size_wh
    least = max(1.0, HD_MIN_SHORT_SIDE_PX / min(width, height))
    most = math.sqrt(IDPHOTO_OUTPUT.max_pixels / (width * height))
    return max(least, min(1.0 / out_px_per_src_px, most))


def scale_affine(affine: np.ndarray, factor: float) -> np.ndarray:
    """``affine`` followed by a ``factor`` zoom of the output grid, pixel centres kept aligned."""
    return np.asarray(affine, dtype=np.float64) * factor + np.array([[0.0, 0.0, 1.0], [0.0, 0.0, 1.0]]) * (
        (factor - 1.0) / 2.0
    )


def plan_sheet(canvas: SheetCanvas, photo_size_px: tuple[int, int], photo_dpi: float) -> SheetLayout:
    """As many upright copies as fit, trying the sheet both ways round; gaps spread evenly, or exactly
    ``canvas.gap_px`` with the block centred when the caller fixed the gap.

    The photo keeps its physical size: a 350 DPI preset is resampled to the sheet's DPI.
    """
    scale = canvas.dpi / photo_dpi
    photo_w, photo_h = (max(1, int(round(v * scale))) for v in photo_size_px)
    min_gap = canvas.gap_px if canvas.gap_px is not None else canvas.px(SHEET_MIN_GAP_PX)
    margin = canvas.px(SHEET_MIN_MARGIN_PX)
    options = []
    for sheet_w, sheet_h in (canvas.size_wh, canvas.size_wh[::-1]):
        columns = _copies_along(sheet_w, photo_w, margin, min_gap)
        rows = _copies_along(sheet_h, photo_h, margin, min_gap)
        options.append((columns * rows, sheet_w, sheet_h, columns, rows))
    count, sheet_w, sheet_h, columns, rows = max(options, key=lambda o: o[0])
    if not count:
        return SheetLayout((sheet_w, sheet_h), (photo_w, photo_h), 0, 0, ())
    xs = _starts(sheet_w, photo_w, columns, canvas.gap_px)
    ys = _starts(sheet_h, photo_h, rows, canvas.gap_px)
    origins = tuple((x, y) for y in ys for x in xs)
    return SheetLayout((sheet_w, sheet_h), (photo_w, photo_h), columns, rows, origins)


def _starts(sheet_px: int, photo_px: int, copies: int, gap_px: int | None) -> list[int]:
    """Where each copy starts along one side: even gaps (edges included), or a fixed gap with the block centred."""
    if gap_px is None:
        gap = (sheet_px - copies * photo_px) / (copies + 1)
        return [int(round(gap + i * (photo_px + gap))) for i in range(copies)]
    first = (sheet_px - copies * photo_px - (copies - 1) * gap_px) // 2
    return [first + i * (photo_px + gap_px) for i in range(copies)]


def _copies_along(sheet_px: int, photo_px: int, margin_px: int, gap_px: int) -> int:
    usable = sheet_px - 2 * margin_px + gap_px
    return max(0, usable // (photo_px + gap_px))


def render_sheet(photo_rgb: np.ndarray, plan: SheetLayout, *, cut_lines: bool = False) -> np.ndarray:
    """White sheet with the copies pasted at ``plan.origins``; optional 1 px grey cut lines along every edge."""
    sheet_w, sheet_h = plan.sheet_wh
    photo_w, photo_h = plan.photo_wh
    sheet = np.full((sheet_h, sheet_w, 3), 255, dtype=np.uint8)
    if photo_rgb.shape[:2] != (photo_h, photo_w):
        photo_rgb = cv2.resize(photo_rgb, (photo_w, photo_h), interpolation=cv2.INTER_AREA)
    if cut_lines:
        for x, y in plan.origins:
            for edge_x in (x - 1, x + photo_w):
                sheet[:, max(0, min(sheet_w - 1, edge_x))] = CUT_LINE_GREY
            for edge_y in (y - 1, y + photo_h):
                sheet[max(0, min(sheet_h - 1, edge_y)), :] = CUT_LINE_GREY
    for x, y in plan.origins:
        sheet[y : y + photo_h, x : x + photo_w] = photo_rgb
    return sheet


def encode_sheet(sheet_rgb: np.ndarray, fmt: Literal["jpeg", "png"], dpi: float = SHEET_DPI) -> bytes:
    return encode_image(sheet_rgb, fmt, dpi=(dpi, dpi), quality=SHEET_QUALITY, subsampling="4:4:4")
