"""Bytes out: the photo at its exact pixel size and DPI, within the caller's KB window, and print sheets.

KB is 1024 bytes (what exam registration sites mean). A JPEG's size is steered only by honest means, quality (binary
search) and chroma subsampling (4:4:4 while there is room, 4:2:0 to shrink); bytes are never padded. When a minimum
cannot be reached even at quality 100 with 4:4:4, the best we can do is returned and the shortfall reported.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

import cv2
import numpy as np

from deployments.common.image import encode_image

logger = logging.getLogger(__name__)

KB_BYTES = 1024
DEFAULT_QUALITY = 92
SHEET_QUALITY = 95
SHEET_DPI = 300.0
# Sheet sizes in pixels at 300 DPI, landscape: 4x6 in, 3.5x5 in, A4 (210x297 mm).
SHEET_SIZES_PX: dict[str, tuple[int, int]] = {"6inch": (1800, 1200), "5inch": (1500, 1050), "a4": (3508, 2480)}
SHEET_MIN_MARGIN_PX = 30
SHEET_MIN_GAP_PX = 20
CUT_LINE_GREY = 200


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
    """Where copies go on a print sheet (all in sheet pixels at 300 DPI)."""

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


def plan_sheet(layout: str, photo_size_px: tuple[int, int], photo_dpi: float) -> SheetLayout:
    """As many upright copies as fit, trying the sheet both ways round; gaps spread evenly.

    The photo keeps its physical size: a 350 DPI preset is resampled to 300 DPI for the sheet.
    """
    landscape = SHEET_SIZES_PX[layout]
    scale = SHEET_DPI / photo_dpi
    photo_w, photo_h = (int(round(v * scale)) for v in photo_size_px)
    options = []
    for sheet_w, sheet_h in (landscape, landscape[::-1]):
        columns = _copies_along(sheet_w, photo_w)
        rows = _copies_along(sheet_h, photo_h)
        options.append((columns * rows, sheet_w, sheet_h, columns, rows))
    count, sheet_w, sheet_h, columns, rows = max(options, key=lambda o: o[0])
    gap_x = (sheet_w - columns * photo_w) / (columns + 1) if count else 0
    gap_y = (sheet_h - rows * photo_h) / (rows + 1) if count else 0
    origins = tuple(
        (int(round(gap_x + c * (photo_w + gap_x))), int(round(gap_y + r * (photo_h + gap_y))))
        for r in range(rows)
        for c in range(columns)
    )
    return SheetLayout((sheet_w, sheet_h), (photo_w, photo_h), columns, rows, origins)


def _copies_along(sheet_px: int, photo_px: int) -> int:
    usable = sheet_px - 2 * SHEET_MIN_MARGIN_PX + SHEET_MIN_GAP_PX
    return max(0, usable // (photo_px + SHEET_MIN_GAP_PX))


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


def encode_sheet(sheet_rgb: np.ndarray, fmt: Literal["jpeg", "png"]) -> bytes:
    return encode_image(sheet_rgb, fmt, dpi=(SHEET_DPI, SHEET_DPI), quality=SHEET_QUALITY, subsampling="4:4:4")
