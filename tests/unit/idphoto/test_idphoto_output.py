"""KB targets met honestly (never padded) and print sheets that fit as many copies as the paper allows."""

from __future__ import annotations

import io

import cv2
import numpy as np
import pytest
from PIL import Image, JpegImagePlugin

from deployments.common.image import encode_image
from deployments.idphoto.output import KB_BYTES, PRESET_SHEETS, custom_canvas, encode_photo, plan_sheet, render_sheet


@pytest.fixture(scope="module")
def textured() -> np.ndarray:
    """A 295x413 photo-like image: smooth shapes plus fine noise, so JPEG size depends on quality."""
    rng = np.random.default_rng(1)
    base = cv2.resize(rng.integers(0, 255, (12, 9, 3), dtype=np.uint8), (295, 413), interpolation=cv2.INTER_CUBIC)
    return np.clip(base.astype(int) + rng.integers(-6, 7, base.shape), 0, 255).astype(np.uint8)


def test_default_encoding_is_444_at_q92_with_dpi(textured):
    encoded = encode_photo(textured, "jpeg", 300)
    assert (encoded.quality, encoded.subsampling, encoded.size_ok) == (92, "4:4:4", True)
    assert Image.open(io.BytesIO(encoded.data)).info["dpi"] == pytest.approx((300, 300))


def test_reachable_window_is_met(textured):
    natural_kb = len(encode_photo(textured, "jpeg", 300).data) / KB_BYTES
    cap = int(natural_kb * 0.4)
    shrunk = encode_photo(textured, "jpeg", 300, min_kb=cap // 2, max_kb=cap)
    assert shrunk.size_ok and cap // 2 * KB_BYTES <= len(shrunk.data) <= cap * KB_BYTES
    assert shrunk.quality < 92
    floor = int(natural_kb * 1.2) + 1
    grown = encode_photo(textured, "jpeg", 300, min_kb=floor)
    assert grown.size_ok and len(grown.data) >= floor * KB_BYTES and grown.quality > 92
    assert Image.open(io.BytesIO(grown.data)).size == (295, 413)


def test_unreachable_minimum_is_reported_not_padded(textured):
    best = encode_photo(textured, "jpeg", 300, min_kb=5000)
    assert not best.size_ok
    assert "min_kb unreachable" in best.note and "never padded" in best.note
    assert (best.quality, best.subsampling) == (100, "4:4:4")
    # The bytes are a plain JPEG: it ends at its EOI marker with nothing appended.
    assert best.data.endswith(b"\xff\xd9") and len(best.data) < 5000 * KB_BYTES
    Image.open(io.BytesIO(best.data)).load()


def test_tiny_cap_switches_to_420(textured):
    """Under a cap 4:4:4 meets only at a low quality, 4:2:0 buys quality back: the bytes are 4:2:0, and better than
    the best 4:4:4 under the same cap."""
    q420 = encode_photo(textured, "jpeg", 300, max_kb=6)
    assert q420.size_ok and len(q420.data) <= 6 * KB_BYTES
    assert q420.subsampling == "4:2:0"
    assert JpegImagePlugin.get_sampling(Image.open(io.BytesIO(q420.data))) == 2  # 2 = 4:2:0 in the file itself
    best_444 = max(
        quality
        for quality in range(1, 93)
        if len(encode_image(textured, "jpeg", dpi=(300, 300), quality=quality, subsampling="4:4:4")) <= 6 * KB_BYTES
    )
    assert q420.quality > best_444


@pytest.mark.parametrize(
    ("layout", "size_px", "dpi", "count"),
    [
        ("6inch", (295, 413), 300, 12),  # 3 x 4 on the sheet held upright (10 when landscape)
        ("5inch", (295, 413), 300, 9),
        ("a4", (295, 413), 300, 56),
        ("6inch", (413, 579), 300, 4),
        ("6inch", (600, 600), 300, 2),
        ("6inch", (358, 441), 350, 12),  # resampled to its physical size at 300 DPI: 307x378
        ("6inch", (1050, 1499), 300, 1),
    ],
)
def test_sheet_counts(layout, size_px, dpi, count):
    plan = plan_sheet(PRESET_SHEETS[layout], size_px, dpi)
    assert plan.count == count == plan.columns * plan.rows
    sheet_w, sheet_h = plan.sheet_wh
    photo_w, photo_h = plan.photo_wh
    boxes = [(x, y, x + photo_w, y + photo_h) for x, y in plan.origins]
    for x0, y0, x1, y1 in boxes:
        assert x0 >= 20 and y0 >= 20 and x1 <= sheet_w - 20 and y1 <= sheet_h - 20
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert a[2] + 19 < b[0] or b[2] + 19 < a[0] or a[3] + 19 < b[1] or b[3] + 19 < a[1]


def test_sheet_render_with_cut_lines():
    photo = np.full((413, 295, 3), 40, np.uint8)
    plan = plan_sheet(PRESET_SHEETS["6inch"], (295, 413), 300)
    plain = render_sheet(photo, plan)
    lined = render_sheet(photo, plan, cut_lines=True)
    assert plain.shape == (1800, 1200, 3)
    assert (plain == 40).all(axis=2).sum() == 12 * 295 * 413
    assert (lined == 200).all(axis=2).any() and not (plain == 200).all(axis=2).any()
    x, y = plan.origins[0]
    assert (lined[y : y + 413, x : x + 295] == 40).all()


@pytest.mark.parametrize(
    ("layout", "sheet_wh", "count"),
    [("3r", (1500, 1050), 9), ("4r", (1800, 1200), 12)],  # 3.5x5 in and 4x6 in at 300 DPI, cn-1inch copies
)
def test_3r_and_4r_sheets_are_their_paper_at_300_dpi(layout, sheet_wh, count):
    plan = plan_sheet(PRESET_SHEETS[layout], (295, 413), 300)
    assert sorted(plan.sheet_wh) == sorted(sheet_wh)
    assert plan.count == count


def test_custom_canvas_has_its_pixels_at_its_dpi_and_the_exact_gap():
    canvas = custom_canvas(100.0, 150.0, 600.0, 2.0)  # 100x150 mm at 600 DPI, 2 mm gaps
    assert canvas.size_wh == (3543, 2362) and canvas.gap_px == 47
    plan = plan_sheet(canvas, (295, 413), 300)  # the 25x35 mm photo becomes 590x826 px at 600 DPI
    assert plan.photo_wh == (590, 826)
    # 60 px margins: landscape holds 5 x 2 (portrait only 3 x 3)
    assert (plan.sheet_wh, plan.columns, plan.rows, plan.count) == ((3543, 2362), 5, 2, 10)
    xs = sorted({x for x, _ in plan.origins})
    ys = sorted({y for _, y in plan.origins})
    assert [b - a for a, b in zip(xs, xs[1:])] == [590 + 47] * 4
    assert [b - a for a, b in zip(ys, ys[1:])] == [826 + 47]
    assert xs[0] == (3543 - 5 * 590 - 4 * 47) // 2  # the block is centred
    sheet = render_sheet(np.full((413, 295, 3), 40, np.uint8), plan)
    assert sheet.shape == (2362, 3543, 3)
    assert (sheet == 40).all(axis=2).sum() == 10 * 590 * 826


def test_custom_canvas_too_small_for_one_photo_has_no_copies():
    plan = plan_sheet(custom_canvas(30.0, 30.0, 300.0, None), (295, 413), 300)
    assert plan.count == 0 and plan.origins == ()
