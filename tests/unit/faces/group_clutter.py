"""What real old group photos hold besides faces, drawn procedurally for ``group_photos.make_old_group_photo``.

A detector tuned on faces over a plain textured wall never meets the things that make it invent faces in a real
photo: stone and brick walls, wallpaper, foliage, windows, pictures on the wall, patterned clothes, hands, hats, the
white or deckled border of the print, album corners, creases and long scratches. Each is drawn here on the grey
float canvas, never over a true face box (hats stop at the forehead, hands sit below the chin, pictures and foliage
stay off the rows of people), so the ground truth stays exact. Non-face patches are the non-face half of
``skimage.data.lfw_subset`` (real photo texture at face scale) and skimage's textures. Every tone stays within
``TONE_RANGE``, the range of the people drawn, so the print's contrast stretch in ``_age`` leaves the faces' contrast
as it is without clutter.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

TONE_RANGE = (15.0, 235.0)


@dataclass(frozen=True)
class Layout:
    """Where the people stand: the first row's face centre line, the last row's, and the x extent of the rows."""

    top_y: float
    bottom_y: float
    left_x: float
    right_x: float
    face_side: float


def wall(rng: np.random.Generator, width: int, height: int, face_side: float) -> np.ndarray:
    """A background drawn from: stone blocks, brick courses, wallpaper, wood planks, or a stretched skimage texture."""
    kind = int(rng.integers(0, 5))
    if kind == 0:
        base = _stone(rng, width, height, face_side)
    elif kind == 1:
        base = _bricks(rng, width, height, face_side)
    elif kind == 2:
        base = _wallpaper(rng, width, height, face_side)
    elif kind == 3:
        base = _planks(rng, width, height, face_side)
    else:
        base = skimage_texture(rng, width, height)
    base = (base - base.mean()) * rng.uniform(0.5, 1.0) + rng.uniform(110, 180)
    base += np.linspace(rng.uniform(-30, 30), rng.uniform(-30, 30), height, dtype=np.float32)[:, None]
    return np.clip(base, 40, 220).astype(np.float32)


def _noise(rng: np.random.Generator, width: int, height: int, cell_px: float) -> np.ndarray:
    """Smooth noise with features of about ``cell_px``."""
    small = rng.standard_normal((max(2, int(height / cell_px) + 2), max(2, int(width / cell_px) + 2)))
    return cv2.resize(small.astype(np.float32), (width, height), interpolation=cv2.INTER_CUBIC)


def _stone(rng, width, height, face_side) -> np.ndarray:
    """Irregular stones (a Voronoi tiling of random seeds), each its own tone and grain, dark mortar between."""
    cell_px = face_side * rng.uniform(0.8, 2.5)
    count = int(width * height / cell_px**2) + 4
    seeds = np.ones((height, width), np.uint8)
    xs, ys = rng.integers(0, width, count), rng.integers(0, height, count)
    seeds[ys, xs] = 0
    _, labels = cv2.distanceTransformWithLabels(seeds, cv2.DIST_L2, 5, labelType=cv2.DIST_LABEL_CCOMP)
    tones = rng.normal(0, 25, labels.max() + 1).astype(np.float32)
    image = tones[labels] + _noise(rng, width, height, cell_px / 6) * 8
    edges = (np.diff(labels, axis=0, prepend=labels[:1]) != 0) | (np.diff(labels, axis=1, prepend=labels[:, :1]) != 0)
    mortar = cv2.dilate(edges.astype(np.uint8), np.ones((3, 3), np.uint8), iterations=int(rng.integers(1, 3)))
    return np.where(mortar > 0, -45.0, image).astype(np.float32)


def _bricks(rng, width, height, face_side) -> np.ndarray:
    course_px = face_side * rng.uniform(0.3, 0.7)
    brick_px = course_px * rng.uniform(2.0, 3.2)
    image = _noise(rng, width, height, course_px / 3) * 6
    for row, y in enumerate(np.arange(0, height, course_px)):
        offset = (row % 2) * brick_px / 2
        for x in np.arange(-offset, width, brick_px):
            x0, y0 = int(x) + 2, int(y) + 2
            image[y0 : int(y + course_px) - 1, max(0, x0) : int(x + brick_px) - 1] += rng.normal(0, 18)
        image[int(y) : int(y) + 2] -= 40
    return image


def _wallpaper(rng, width, height, face_side) -> np.ndarray:
    """A repeating motif (rings, diamonds, dots, stems) the size of a face or smaller, tiled."""
    tile_px = max(8, int(face_side * rng.uniform(0.5, 1.5)))
    tile = np.zeros((tile_px, tile_px), np.float32)
    centre = tile_px // 2
    for _ in range(int(rng.integers(2, 6))):
        shape, tone = int(rng.integers(0, 3)), float(rng.choice([-1.0, 1.0]) * rng.uniform(15, 40))
        size = max(1, int(tile_px * rng.uniform(0.08, 0.4)))
        if shape == 0:
            cv2.circle(tile, (centre, centre), size, tone, int(rng.integers(1, 3)), lineType=cv2.LINE_AA)
        elif shape == 1:
            diamond = np.array([[centre, centre - size], [centre + size, centre], [centre, centre + size]])
            diamond = np.vstack([diamond, [[centre - size, centre]]]).astype(np.int32)
            cv2.polylines(tile, [diamond], True, tone, 1, lineType=cv2.LINE_AA)
        else:
            for dx, dy in ((0, 0), (tile_px // 2, tile_px // 2)):
                cv2.circle(tile, ((centre + dx) % tile_px, (centre + dy) % tile_px), max(1, size // 3), tone, -1)
    reps = (height // tile_px + 1, width // tile_px + 1)
    return np.tile(tile, reps)[:height, :width] + _noise(rng, width, height, face_side) * 5


def _planks(rng, width, height, face_side) -> np.ndarray:
    plank_px = face_side * rng.uniform(0.5, 1.5)
    xs = np.arange(width, dtype=np.float32)
    grain = np.sin(xs / rng.uniform(2, 6) + _noise(rng, width, height, face_side * 2) * 3) * 10
    seams = (np.arange(width) % int(plank_px) < 2).astype(np.float32) * -40
    image = grain + seams[None, :]
    return image if rng.random() < 0.5 else np.ascontiguousarray(cv2.resize(image.T, (width, height)))


def skimage_texture(rng: np.random.Generator, width: int, height: int) -> np.ndarray:
    """One of skimage's brick, gravel or grass textures, tiled and stretched 1.5–4x (the first generated walls)."""
    from skimage import data

    texture = [data.brick, data.gravel, data.grass][int(rng.integers(0, 3))]().astype(np.float32)
    scale = rng.uniform(1.5, 4.0)
    tiled = np.tile(texture, (int(np.ceil(height / (512 * scale))) + 1, int(np.ceil(width / (512 * scale))) + 1))
    tiled = cv2.resize(tiled, (tiled.shape[1] * round(512 * scale) // 512, tiled.shape[0] * round(512 * scale) // 512))
    return tiled[:height, :width]


def decorate_wall(canvas: np.ndarray, rng: np.random.Generator, layout: Layout) -> None:
    """Pictures on the wall (real non-face photo patches in dark frames), a window, and foliage, all above the first
    row of heads or beside the rows."""
    from skimage import data

    height, width = canvas.shape
    side = layout.face_side
    clear_top = int(layout.top_y - 1.6 * side)  # above the first row's hair and hats
    non_faces = data.lfw_subset()[100:]
    for _ in range(int(rng.integers(1, 5))):
        patch_px = int(side * rng.uniform(1.0, 3.0))
        if clear_top - patch_px < 10:
            break
        x0, y0 = int(rng.integers(0, max(1, width - patch_px))), int(rng.integers(0, clear_top - patch_px))
        picture = cv2.resize(non_faces[int(rng.integers(0, len(non_faces)))].astype(np.float32), (patch_px, patch_px))
        frame = max(2, patch_px // 12)
        canvas[max(0, y0 - frame) : y0 + patch_px + frame, max(0, x0 - frame) : x0 + patch_px + frame] = 30
        canvas[y0 : y0 + patch_px, x0 : x0 + patch_px] = TONE_RANGE[0] + picture * (TONE_RANGE[1] - TONE_RANGE[0])
    if rng.random() < 0.4 and clear_top > side:  # a window with mullions
        w_px, h_px = int(side * rng.uniform(2, 5)), int(min(clear_top, side * rng.uniform(2, 5)))
        x0 = int(rng.integers(0, max(1, width - w_px)))
        canvas[0:h_px, x0 : x0 + w_px] = rng.uniform(200, TONE_RANGE[1])
        for k in range(1, 3):
            canvas[0:h_px, x0 + k * w_px // 3 - 2 : x0 + k * w_px // 3 + 2] = 50
            canvas[k * h_px // 3 - 2 : k * h_px // 3 + 2, x0 : x0 + w_px] = 50
    band_px = side * rng.uniform(2, 6)  # bushes beside the rows, a hedge or tree tops above them
    rows_y = (layout.top_y - 2 * side, layout.bottom_y + 3 * side)
    for x_range in (
        (layout.left_x - side - band_px, layout.left_x - side),
        (layout.right_x + side, layout.right_x + side + band_px),
    ):
        if rng.random() < 0.5:
            _foliage(canvas, rng, x_range, rows_y, side)
    if rng.random() < 0.4 and clear_top > side:
        x0 = rng.uniform(0, width / 2)
        _foliage(canvas, rng, (x0, x0 + rng.uniform(0.2, 0.5) * width), (max(0, clear_top - band_px), clear_top), side)


def _foliage(canvas, rng, x_range, y_range, side) -> None:
    """Leaves: many small elliptic blobs, light and dark, at random angles, over a dark base."""
    x0, x1 = int(max(0, x_range[0])), int(min(canvas.shape[1], x_range[1]))
    y0, y1 = int(max(0, y_range[0])), int(min(canvas.shape[0], y_range[1]))
    if x1 - x0 < 4 or y1 - y0 < 4:
        return
    region = canvas[y0:y1, x0:x1]
    region[:] = region * 0.3 + 40
    count = int((x1 - x0) * (y1 - y0) / (side * 0.25) ** 2)
    for _ in range(min(count, 6000)):
        centre = (int(rng.integers(0, x1 - x0)), int(rng.integers(0, y1 - y0)))
        axes = (max(1, int(side * rng.uniform(0.05, 0.25))), max(1, int(side * rng.uniform(0.03, 0.12))))
        cv2.ellipse(region, centre, axes, float(rng.uniform(0, 180)), 0, 360, float(rng.uniform(20, 200)), -1)


def pattern(rng: np.random.Generator, height: int, width: int, side: float) -> np.ndarray:
    """A cloth pattern in [-1, 1]: stripes, checks, plaid or polka dots, at a scale of 0.1–0.4 face sides."""
    period = max(3.0, side * rng.uniform(0.1, 0.4))
    ys, xs = np.mgrid[:height, :width].astype(np.float32)
    angle = rng.uniform(0, np.pi)
    u = xs * np.cos(angle) + ys * np.sin(angle)
    v = -xs * np.sin(angle) + ys * np.cos(angle)
    kind = int(rng.integers(0, 4))
    if kind == 0:
        return np.sign(np.sin(2 * np.pi * u / period)).astype(np.float32)
    if kind == 1:
        return (np.sign(np.sin(2 * np.pi * u / period)) * np.sign(np.sin(2 * np.pi * v / period))).astype(np.float32)
    if kind == 2:
        return ((np.sin(2 * np.pi * u / period) > 0.6) | (np.sin(2 * np.pi * v / period) > 0.6)).astype(np.float32)
    cell = np.stack([np.mod(u, period) - period / 2, np.mod(v, period) - period / 2])
    return np.where((cell**2).sum(axis=0) < (period * 0.25) ** 2, 1.0, -1.0).astype(np.float32)


def dress(canvas: np.ndarray, rng: np.random.Generator, polygon: np.ndarray, side: float, tone: float) -> None:
    """Fill a body polygon with a patterned cloth (half the people; the rest keep the plain coat)."""
    if rng.random() < 0.5:
        return
    x0, y0 = np.floor(polygon.min(axis=0)).astype(int)
    x1, y1 = np.ceil(polygon.max(axis=0)).astype(int)
    x0, y0, x1, y1 = max(0, x0), max(0, y0), min(canvas.shape[1], x1), min(canvas.shape[0], y1)
    if x1 - x0 < 2 or y1 - y0 < 2:
        return
    mask = np.zeros((y1 - y0, x1 - x0), np.float32)
    cv2.fillPoly(mask, [np.round(polygon - [x0, y0]).astype(np.int32)], 1.0, lineType=cv2.LINE_AA)
    cloth = np.clip(tone + pattern(rng, y1 - y0, x1 - x0, side) * rng.uniform(20, 60), *TONE_RANGE)
    region = canvas[y0:y1, x0:x1]
    region[:] = region * (1 - mask) + cloth * mask


def draw_hat(
    canvas: np.ndarray, rng: np.random.Generator, centre: tuple[float, float], side: float, *, max_height_px: float
) -> None:
    """A hat on a third of the heads: crown above the head (at most ``max_height_px`` tall, so it stays clear of
    the row behind), brim at the top of the forehead (never lower)."""
    if rng.random() > 0.33:
        return
    cx, cy = centre
    tone = float(rng.uniform(15, 200))
    brim_y = cy - 0.56 * side
    crown_h = min(side * rng.uniform(0.35, 0.8), max(0.2 * side, max_height_px))
    crown = np.array([[cx - 0.45 * side, brim_y], [cx - 0.38 * side, brim_y - crown_h]])
    crown = np.vstack([crown, [[cx + 0.38 * side, brim_y - crown_h], [cx + 0.45 * side, brim_y]]])
    cv2.fillPoly(canvas, [np.round(crown).astype(np.int32)], tone, lineType=cv2.LINE_AA)
    axes = (round(side * rng.uniform(0.6, 0.95)), max(1, round(0.06 * side)))
    cv2.ellipse(canvas, (round(cx), round(brim_y)), axes, 0, 0, 360, tone * 0.8, -1, lineType=cv2.LINE_AA)


def draw_hands(canvas: np.ndarray, rng: np.random.Generator, centre: tuple[float, float], side: float) -> None:
    """Hands at the waist of a third of the people: a palm and four fingers in face-like grey tones."""
    if rng.random() > 0.33:
        return
    cx, cy = centre
    for sign in (-1, 1):
        if rng.random() < 0.3:
            continue
        hx, hy = cx + sign * side * rng.uniform(0.6, 1.1), cy + side * rng.uniform(1.8, 2.6)
        tone = float(rng.uniform(110, 210))
        palm = (max(1, round(0.22 * side)), max(1, round(0.28 * side)))
        cv2.ellipse(canvas, (round(hx), round(hy)), palm, float(rng.uniform(-30, 30)), 0, 360, tone, -1)
        for finger in range(4):
            fx = hx + (finger - 1.5) * 0.11 * side
            axes = (max(1, round(0.045 * side)), max(1, round(0.16 * side)))
            fy = round(hy + 0.3 * side)
            cv2.ellipse(canvas, (round(fx), fy), axes, 0, 0, 360, tone - 15, -1, lineType=cv2.LINE_AA)


def scratch(canvas: np.ndarray, rng: np.random.Generator) -> None:
    """Long curved scratches, a crease across the print, a torn corner."""
    height, width = canvas.shape
    for _ in range(int(rng.integers(1, 6))):
        start = np.array([rng.uniform(0, width), rng.uniform(0, height)])
        heading, points = rng.uniform(0, 2 * np.pi), [start]
        for _ in range(int(rng.integers(5, 30))):
            heading += rng.normal(0, 0.2)
            points.append(points[-1] + 20 * np.array([np.cos(heading), np.sin(heading)]))
        value = float(rng.choice(TONE_RANGE))
        cv2.polylines(canvas, [np.round(points).astype(np.int32)], False, value, int(rng.integers(1, 3)), cv2.LINE_AA)
    if rng.random() < 0.5:  # a fold: one side slightly brighter, a bright line on the ridge
        x_top, x_bottom = rng.uniform(0, width, 2)
        ys, xs = np.mgrid[:height, :width]
        left = xs < x_top + (x_bottom - x_top) * ys / height
        canvas[left] = np.clip(canvas[left] + rng.uniform(-15, 15), *TONE_RANGE)
        cv2.line(canvas, (int(x_top), 0), (int(x_bottom), height - 1), TONE_RANGE[1], 2, cv2.LINE_AA)
    if rng.random() < 0.4:  # a torn-off corner
        size = int(min(width, height) * rng.uniform(0.05, 0.15))
        corner = [(0, 0), (width - 1, 0), (0, height - 1), (width - 1, height - 1)][int(rng.integers(0, 4))]
        sx, sy = (1 if corner[0] == 0 else -1), (1 if corner[1] == 0 else -1)
        jag = [
            (corner[0] + sx * size * t, corner[1] + sy * size * (1 - t) + rng.normal(0, 4))
            for t in np.linspace(0, 1, 9)
        ]
        cv2.fillPoly(canvas, [np.round([corner, *jag]).astype(np.int32)], TONE_RANGE[1])


def mount(canvas: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The print's border: a white or cream margin (sometimes deckled, with a thin rule) or a dark album page with
    corner mounts, and sometimes the scanner's dark bed beyond it. Returns the larger canvas and the shift (x, y)."""
    height, width = canvas.shape
    margin = int(min(width, height) * rng.uniform(0.03, 0.08))
    album = rng.random() < 0.3
    page = float(rng.uniform(20, 60) if album else rng.uniform(215, TONE_RANGE[1]))
    out = np.full((height + 2 * margin, width + 2 * margin), page, np.float32)
    out[margin : margin + height, margin : margin + width] = canvas
    if not album and rng.random() < 0.5:  # deckled edge: a wavy, torn-looking outer edge
        wave = (_noise(rng, out.shape[1], 1, 12)[0] * margin * 0.2).astype(int)
        for x in range(out.shape[1]):
            out[: max(0, margin // 4 + wave[x]), x] = 30
            out[out.shape[0] - max(0, margin // 4 - wave[x]) :, x] = 30
    if not album and rng.random() < 0.5:  # a thin rule around the picture
        cv2.rectangle(out, (margin - 4, margin - 4), (margin + width + 3, margin + height + 3), 60.0, 1)
    if album:  # triangular photo corners
        size = int(margin * 2.5)
        for cx, cy, sx, sy in ((margin, margin, 1, 1), (margin + width, margin, -1, 1)):
            for y_base, y_sign in ((cy, sy), (margin + height if sy == 1 else cy, -1)):
                triangle = np.array([[cx - sx * 4, y_base - y_sign * 4], [cx + sx * size, y_base - y_sign * 4]])
                triangle = np.vstack([triangle, [[cx - sx * 4, y_base + y_sign * size]]])
                cv2.fillPoly(out, [triangle.astype(np.int32)], TONE_RANGE[0])
    if rng.random() < 0.3:  # the scanner bed around the print
        bed = int(margin * rng.uniform(0.5, 1.5))
        out = cv2.copyMakeBorder(out, bed, bed, bed, bed, cv2.BORDER_CONSTANT, value=TONE_RANGE[0])
        margin += bed
    return out, np.array([margin, margin], np.float64)
