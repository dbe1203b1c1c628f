"""Synthetic "old group photos" with ground-truth face boxes, for recall tests and ``bench/bench_group_faces.py``.

No real group photo ships with the project, so one is built from real faces that do: skimage's astronaut and the
100 LFW faces of ``skimage.data.lfw_subset`` and, when ``../shared/eval`` is present, its aligned crops and the faces
of its whole photos. LFW crops are tight (no hair, no head outline), which makes them harder than a real head in a
group photo, so faces with their context are drawn with probability ``CONTEXT_FACE_SHARE`` whenever there are some
(with a plain clone that is the astronaut alone). Each canvas has rows of people (a head with its hair, a dark body)
on a textured wall, faces of ``FACE_SIDE_PX`` (box side; eye distance about 0.45 of it), some rolled in plane,
some turned (yaw) or looking down (pitch, drawn as the face plane turned about its horizontal axis), then aged as a
print: grey or sepia, low contrast, blur, film grain, vignetting, dust and JPEG. Everything is drawn from one seed,
so a set is reproducible.

Ground truth: the axis-aligned bounds of each face's box (forehead to chin) after its own transform, in
pixel-index coordinates. :func:`match_faces` states how detections are scored against it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from tests.unit.faces import group_clutter
from tests.unit.faces.group_clutter import skimage_texture

FACE_SIDE_PX = (28.0, 60.0)
CANVAS_WIDTH_PX = (1600, 3000)
# FFHQ-aligned crops (facexlib template, eyes at (193, 240) and (319, 240) of 512): face box per crop side.
FFHQ_FACE_BOX_PER_SIDE = np.array([118.0, 172.0, 394.0, 448.0]) / 512.0
# Astronaut (skimage, 512x512): the face box the detector and mesh agree on.
ASTRONAUT_FACE_BOX = np.array([177.0, 80.0, 272.0, 175.0])
# Faces of the shared whole photos (boxes found by our analyzer at full resolution; every face of each photo).
SHARED_PHOTO_FACE_BOXES = {
    "whole/codeformer_00.jpg": ((391, 77, 432, 118), (57, 88, 98, 129), (175, 85, 215, 125), (284, 89, 318, 122)),
    "whole/codeformer_02.png": ((139, 69, 288, 217), (395, 108, 543, 256), (618, 109, 766, 256), (862, 120, 1006, 263)),
    "whole/gfpgan_00.jpg": ((776, 409, 933, 567), (497, 806, 645, 954)),
    "whole/gfpgan_10045.png": ((170, 127, 255, 211), (383, 142, 458, 217), (369, 448, 438, 517)),
    "whole/gfpgan_blake_lively.jpg": ((408, 116, 608, 315), (99, 155, 249, 304)),
    "whole/gpen_selfie_20201217.jpg": ((676, 350, 1763, 1437),),
    "idphoto/hivision_test0.jpg": ((207, 166, 365, 324),),
    "idphoto/hivision_test1.jpg": ((240, 413, 571, 743),),
    "idphoto/hivision_test2.jpg": ((234, 187, 430, 383),),
}
CONTEXT_FACE_SHARE = 0.6
# Film grain (grey levels, after a 0.7 px blur that gives it a clump size): a scan of an aged print, and a harsh
# setting for stress runs (faces that still read to a person, but barely).
GRAIN_SIGMA = (3.0, 8.0)
HARSH_GRAIN_SIGMA = (8.0, 16.0)
# A detection matches a true face when its centre lies in the true box and its side is within this ratio range.
MATCH_SIDE_RATIO = (0.5, 2.0)


@dataclass(frozen=True)
class FaceSource:
    """A real photo and the face box inside it; ``context`` says how far beyond the box the photo is usable
    (hair, neck) as a multiple of the box side (1.0 = the box itself, as for the tight LFW crops)."""

    rgb: np.ndarray
    box: np.ndarray
    context: float


@dataclass(frozen=True)
class GroupPhoto:
    """One canvas and its faces: ``boxes`` ``(N, 4)`` (x0, y0, x1, y1), plus per face how it was drawn."""

    rgb: np.ndarray
    boxes: np.ndarray
    pitch_deg: np.ndarray
    yaw_deg: np.ndarray
    roll_deg: np.ndarray
    tight_crop: np.ndarray  # (N,) bool: drawn from a tight face crop (LFW) rather than a photo with hair and neck


def face_sources(shared_eval_dir: Path | None) -> list[FaceSource]:
    """Every real face available offline: the astronaut, 100 LFW faces, and the shared crops and photos if present."""
    from skimage import data

    from deployments.common.image import decode_image

    sources = [FaceSource(np.ascontiguousarray(data.astronaut()), ASTRONAUT_FACE_BOX, 1.6)]
    if shared_eval_dir is not None and shared_eval_dir.is_dir():
        for path in sorted((shared_eval_dir / "faces").glob("*.png")):
            rgb = decode_image(path.read_bytes()).rgb
            if rgb.shape[0] == rgb.shape[1]:
                small = cv2.resize(rgb, (256, 256), interpolation=cv2.INTER_AREA)
                sources.append(FaceSource(small, FFHQ_FACE_BOX_PER_SIDE * 256, 1.6))
        for name, boxes in SHARED_PHOTO_FACE_BOXES.items():
            if (shared_eval_dir / name).is_file():
                rgb = decode_image((shared_eval_dir / name).read_bytes()).rgb
                for box in boxes:
                    sources.append(_face_with_context(rgb, np.array(box, np.float64)))
    for face in data.lfw_subset()[:100]:  # the first 100 are faces, the rest non-faces
        grey = np.round(face * 255.0).astype(np.uint8)
        sources.append(FaceSource(np.repeat(grey[:, :, None], 3, axis=2), np.array([0.0, 0.0, 25.0, 25.0]), 1.0))
    return sources


def _face_with_context(photo_rgb: np.ndarray, box: np.ndarray) -> FaceSource:
    """The face and its surroundings cut from a larger photo and shrunk so the box is at most 128 px (sampling a large
    photo straight down to 30 px would alias)."""
    side = max(box[2] - box[0], box[3] - box[1])
    centre = (box[:2] + box[2:]) / 2
    scale = min(1.0, 128.0 / side)
    out_px = round(2.0 * side * scale)
    small = cv2.resize(photo_rgb, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA) if scale < 1 else photo_rgb
    shift = np.array([[1.0, 0.0, out_px / 2 - scale * centre[0]], [0.0, 1.0, out_px / 2 - scale * centre[1]]])
    crop = cv2.warpAffine(small, shift, (out_px, out_px), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    crop_box = np.concatenate([(box[:2] - centre) * scale, (box[2:] - centre) * scale]) + out_px / 2
    return FaceSource(crop, crop_box, 1.6)


def _face_homography(side_px: float, pitch_deg: float, yaw_deg: float, roll_deg: float) -> np.ndarray:
    """3x3 map of a face plane centred at the origin: turned by yaw and pitch (a camera ~4 face sides away), then
    rolled; the result is still centred at the origin."""
    focal = 4.0 * side_px
    pitch, yaw, roll = np.deg2rad([pitch_deg, yaw_deg, roll_deg])
    rx = np.array([[1, 0, 0], [0, np.cos(pitch), -np.sin(pitch)], [0, np.sin(pitch), np.cos(pitch)]])
    ry = np.array([[np.cos(yaw), 0, np.sin(yaw)], [0, 1, 0], [-np.sin(yaw), 0, np.cos(yaw)]])
    rotation = ry @ rx
    # plane point (x, y, 0) at depth `focal` -> projected (focal * X / Z, focal * Y / Z)
    plane_to_camera = np.column_stack([rotation[:, 0], rotation[:, 1], [0.0, 0.0, focal]])
    project = np.diag([focal, focal, 1.0])
    turned = project @ plane_to_camera
    turned /= turned[2, 2]
    c, s = np.cos(roll), np.sin(roll)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]]) @ turned


def _mirrored(source: FaceSource) -> FaceSource:
    width = source.rgb.shape[1]
    x0, y0, x1, y1 = source.box
    flipped = np.ascontiguousarray(source.rgb[:, ::-1])
    return FaceSource(flipped, np.array([width - x1, y0, width - x0, y1]), source.context)


def _apply(h: np.ndarray, points: np.ndarray) -> np.ndarray:
    moved = np.column_stack([points, np.ones(len(points))]) @ h.T
    return moved[:, :2] / moved[:, 2:3]


def _wall(rng: np.random.Generator, width: int, height: int) -> np.ndarray:
    """A grey textured background: a skimage texture stretched, plus a soft vertical gradient."""
    wall = skimage_texture(rng, width, height)
    wall = (wall - wall.mean()) * rng.uniform(0.2, 0.5) + rng.uniform(110, 190)
    wall += np.linspace(rng.uniform(-30, 30), rng.uniform(-30, 30), height, dtype=np.float32)[:, None]
    return wall


def _paste(canvas: np.ndarray, patch: np.ndarray, alpha: np.ndarray, x0: int, y0: int) -> None:
    """Alpha-blend ``patch`` (H, W) onto ``canvas`` at (x0, y0), clipped to the canvas."""
    h, w = patch.shape
    cx0, cy0 = max(0, x0), max(0, y0)
    cx1, cy1 = min(canvas.shape[1], x0 + w), min(canvas.shape[0], y0 + h)
    if cx1 <= cx0 or cy1 <= cy0:
        return
    sub = (slice(cy0 - y0, cy1 - y0), slice(cx0 - x0, cx1 - x0))
    region = canvas[cy0:cy1, cx0:cx1]
    canvas[cy0:cy1, cx0:cx1] = region * (1 - alpha[sub]) + patch[sub] * alpha[sub]


def _draw_body(
    canvas: np.ndarray,
    rng: np.random.Generator,
    centre: tuple[float, float],
    side: float,
    clutter_rng: np.random.Generator | None,
) -> None:
    """A dark coat (patterned for some, with hands, when ``clutter_rng`` is given) with a light collar below the
    face; an oval of hair behind the head."""
    cx, cy = centre
    tone = rng.uniform(20, 90)
    body = np.array([[cx - 1.6 * side, cy + 3.5 * side], [cx - 1.2 * side, cy + 0.9 * side]])
    body = np.vstack([body, [[cx + 1.2 * side, cy + 0.9 * side], [cx + 1.6 * side, cy + 3.5 * side]]])
    cv2.fillPoly(canvas, [np.round(body).astype(np.int32)], float(tone), lineType=cv2.LINE_AA)
    if clutter_rng is not None:
        group_clutter.dress(canvas, clutter_rng, body, side, float(tone))
        group_clutter.draw_hands(canvas, clutter_rng, centre, side)
    collar = np.array([[cx - 0.35 * side, cy + 0.75 * side], [cx + 0.35 * side, cy + 0.75 * side]])
    collar = np.vstack([collar, [[cx, cy + 1.5 * side]]])
    cv2.fillPoly(canvas, [np.round(collar).astype(np.int32)], float(rng.uniform(170, 235)), lineType=cv2.LINE_AA)
    hair = (round(cx), round(cy - 0.15 * side))
    axes = (round(0.62 * side), round(0.72 * side))
    cv2.ellipse(canvas, hair, axes, 0, 0, 360, float(rng.uniform(15, 120)), -1, lineType=cv2.LINE_AA)


def _draw_face(
    canvas: np.ndarray, source: FaceSource, centre: tuple[float, float], side: float, h_face: np.ndarray
) -> np.ndarray:
    """Warp the source's face (and its context) so its box has ``side`` px and lands centred at ``centre`` after
    ``h_face``; returns the true box corners' bounds."""
    x0, y0, x1, y1 = source.box
    box_side = max(x1 - x0, y1 - y0)
    box_centre = np.array([(x0 + x1) / 2, (y0 + y1) / 2])
    grey = cv2.cvtColor(source.rgb, cv2.COLOR_RGB2GRAY).astype(np.float32)
    # source -> face plane (centred, scaled to `side`) -> turned and rolled -> canvas
    to_plane = np.array([[side / box_side, 0, -box_centre[0] * side / box_side], [0, side / box_side, 0], [0, 0, 1]])
    to_plane[1, 2] = -box_centre[1] * side / box_side
    to_canvas = np.array([[1, 0, centre[0]], [0, 1, centre[1]], [0, 0, 1]]) @ h_face @ to_plane
    half_context = source.context * box_side / 2
    context_corners = box_centre + np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]]) * half_context
    bounds = _apply(to_canvas, context_corners)
    px0, py0 = np.floor(bounds.min(axis=0)).astype(int) - 2
    px1, py1 = np.ceil(bounds.max(axis=0)).astype(int) + 2
    shift = np.array([[1, 0, -px0], [0, 1, -py0], [0, 0, 1]], dtype=np.float64)
    size = (int(px1 - px0), int(py1 - py0))
    patch = cv2.warpPerspective(grey, shift @ to_canvas, size, flags=cv2.INTER_AREA, borderMode=cv2.BORDER_REPLICATE)
    # feathered oval (context) or rounded square (tight crops) in source pixels, warped the same way
    mask = np.zeros(grey.shape, np.float32)
    radius = np.array([half_context * 0.8, half_context * 0.95])
    if source.context > 1.0:
        centre_px = (round(box_centre[0]), round(box_centre[1] - 0.05 * box_side))
        cv2.ellipse(mask, centre_px, (round(radius[0]), round(radius[1])), 0, 0, 360, 1.0, -1)
        feather = 0.08 * box_side
    else:
        inset = 0.06 * box_side
        cv2.rectangle(mask, (round(x0 + inset), round(y0 + inset)), (round(x1 - inset), round(y1 - inset)), 1.0, -1)
        feather = 0.05 * box_side
    mask = cv2.GaussianBlur(mask, (0, 0), max(feather, 0.5))
    alpha = cv2.warpPerspective(mask, shift @ to_canvas, size, flags=cv2.INTER_LINEAR)
    _paste(canvas, patch, alpha, int(px0), int(py0))
    true_corners = _apply(to_canvas, np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]]))
    return np.concatenate([true_corners.min(axis=0), true_corners.max(axis=0)])


def _age(
    canvas: np.ndarray, rng: np.random.Generator, face_side: float, grain_sigma: tuple[float, float]
) -> np.ndarray:
    """Grey or sepia print: low contrast, blur, film grain, vignetting, dust specks, JPEG."""
    height, width = canvas.shape
    image = cv2.GaussianBlur(canvas, (0, 0), rng.uniform(0.5, 1.2) * face_side / 40.0)
    low, high = rng.uniform(30, 80), rng.uniform(170, 225)
    image = low + (image - image.min()) * (high - low) / max(float(np.ptp(image)), 1.0)
    image = 255.0 * (image / 255.0) ** rng.uniform(0.8, 1.3)
    grain = cv2.GaussianBlur(rng.standard_normal((height, width), dtype=np.float32), (0, 0), 0.7)
    image += grain * (rng.uniform(*grain_sigma) / float(grain.std()))
    ys, xs = np.ogrid[:height, :width]
    r2 = ((xs - width / 2) / (width / 2)) ** 2 + ((ys - height / 2) / (height / 2)) ** 2
    image *= 1.0 - rng.uniform(0.1, 0.35) * np.clip(r2 / 2, 0, 1)
    for _ in range(int(rng.integers(20, 120))):  # dust and scratches
        x, y = int(rng.integers(0, width)), int(rng.integers(0, height))
        value = float(rng.choice([15.0, 240.0]))
        if rng.random() < 0.8:
            cv2.circle(image, (x, y), int(rng.integers(1, 4)), value, -1)
        else:
            cv2.line(image, (x, y), (x + int(rng.integers(-40, 40)), y + int(rng.integers(20, 300))), value, 1)
    grey = np.clip(image, 0, 255).astype(np.uint8)
    if rng.random() < 0.4:  # sepia toning
        tint = np.array([1.07, 0.95, 0.78], np.float32)
        rgb = np.clip(grey[:, :, None].astype(np.float32) * tint, 0, 255).astype(np.uint8)
    else:
        rgb = np.repeat(grey[:, :, None], 3, axis=2)
    _, data = cv2.imencode(".jpg", rgb[:, :, ::-1], [cv2.IMWRITE_JPEG_QUALITY, int(rng.integers(45, 85))])
    return np.ascontiguousarray(cv2.imdecode(data, cv2.IMREAD_COLOR)[:, :, ::-1])


def make_old_group_photo(
    sources: list[FaceSource],
    *,
    seed: int,
    max_faces: int = 60,
    grain_sigma: tuple[float, float] = GRAIN_SIGMA,
    clutter: bool = True,
) -> GroupPhoto:
    """One aged group photo: 2–4 rows of people; about a quarter of the faces look down 20–40°, a fifth are
    turned 20–40°, a third rolled 8–25°. ``clutter`` adds what real photos hold (:mod:`group_clutter`: walls,
    foliage, pictures, patterned clothes, hands, hats, scratches, the print's border) from a second random stream,
    so the same seed places the same faces with or without it."""
    rng = np.random.default_rng(seed)
    clutter_rng = np.random.default_rng([seed, 1]) if clutter else None
    width = int(rng.integers(CANVAS_WIDTH_PX[0], CANVAS_WIDTH_PX[1] + 1))
    height = int(width * rng.uniform(0.62, 0.8))
    face_side = rng.uniform(*FACE_SIDE_PX)
    rows = int(rng.integers(2, 5))
    spacing = face_side * rng.uniform(1.7, 2.4)
    per_row = max(3, min(int(width * rng.uniform(0.6, 0.9) / spacing), max_faces // rows))
    row_gap = face_side * rng.uniform(1.5, 2.1)
    top = height * rng.uniform(0.2, 0.35)
    canvas = _wall(rng, width, height)
    if clutter_rng is not None:
        if clutter_rng.random() < 0.8:
            canvas = group_clutter.wall(clutter_rng, width, height, face_side)
        last_row_y = top + (rows - 1) * row_gap
        extent = spacing * (per_row - 1) / 2 + spacing
        layout = group_clutter.Layout(top, last_row_y, width / 2 - extent, width / 2 + extent, face_side)
        group_clutter.decorate_wall(canvas, clutter_rng, layout)
    context_sources = [source for source in sources if source.context > 1.0]
    tight_sources = [source for source in sources if source.context <= 1.0] or context_sources
    boxes, pitches, yaws, rolls, tight = [], [], [], [], []
    for row in range(rows):
        y = top + row * row_gap
        x_start = (width - spacing * (per_row - 1)) / 2 + (spacing / 2 if row % 2 else 0) * rng.uniform(0.5, 1)
        for column in range(per_row - (row % 2)):
            side = float(np.clip(face_side * rng.uniform(0.85, 1.15), *FACE_SIDE_PX))
            jitter = rng.uniform(-0.15, 0.15, 2)
            centre = (x_start + (column + jitter[0]) * spacing, y + jitter[1] * side)
            kind = rng.random()
            pitch = rng.uniform(20, 40) if kind < 0.25 else rng.uniform(-8, 8)
            yaw = rng.choice([-1, 1]) * rng.uniform(20, 40) if 0.25 <= kind < 0.45 else rng.uniform(-10, 10)
            roll = rng.choice([-1, 1]) * rng.uniform(8, 25) if rng.random() < 0.33 else rng.uniform(-5, 5)
            pool = context_sources if context_sources and rng.random() < CONTEXT_FACE_SHARE else tight_sources
            source = pool[int(rng.integers(0, len(pool)))]
            if rng.random() < 0.5:
                source = _mirrored(source)
            _draw_body(canvas, rng, centre, side, clutter_rng)
            boxes.append(_draw_face(canvas, source, centre, side, _face_homography(side, pitch, yaw, roll)))
            if clutter_rng is not None:
                group_clutter.draw_hat(canvas, clutter_rng, centre, side, max_height_px=row_gap - 1.1 * side)
            pitches.append(pitch)
            tight.append(source.context <= 1.0)
            yaws.append(yaw)
            rolls.append(roll)
    boxes = np.array(boxes)
    if clutter_rng is not None:
        group_clutter.scratch(canvas, clutter_rng)
        canvas, shift = group_clutter.mount(canvas, clutter_rng)
        boxes = boxes + np.concatenate([shift, shift])
    aged = _age(canvas, rng, face_side, grain_sigma)
    return GroupPhoto(aged, boxes, np.array(pitches), np.array(yaws), np.array(rolls), np.array(tight))


@dataclass(frozen=True)
class MatchResult:
    found: np.ndarray  # (N,) bool per true face
    false_positives: int


def match_faces(true_boxes: np.ndarray, detected_boxes: np.ndarray) -> MatchResult:
    """Greedy one-to-one matching, nearest centres first: a detection matches a true face when its centre lies in
    the true box and its side is within ``MATCH_SIDE_RATIO`` of the true side; unmatched detections are false
    positives."""
    found = np.zeros(len(true_boxes), bool)
    if len(detected_boxes) == 0:
        return MatchResult(found, 0)
    det = np.asarray(detected_boxes, np.float64).reshape(-1, 4)
    det_centre = (det[:, :2] + det[:, 2:]) / 2
    det_side = np.maximum(det[:, 2] - det[:, 0], det[:, 3] - det[:, 1])
    true_centre = (true_boxes[:, :2] + true_boxes[:, 2:]) / 2
    true_side = np.maximum(true_boxes[:, 2] - true_boxes[:, 0], true_boxes[:, 3] - true_boxes[:, 1])
    pairs = []
    for i, (centre, side) in enumerate(zip(det_centre, det_side)):
        inside = np.all((centre >= true_boxes[:, :2]) & (centre < true_boxes[:, 2:]), axis=1)
        ratio = side / true_side
        ok = inside & (ratio >= MATCH_SIDE_RATIO[0]) & (ratio <= MATCH_SIDE_RATIO[1])
        for j in np.flatnonzero(ok):
            pairs.append((float(np.linalg.norm(centre - true_centre[j])), i, int(j)))
    used = set()
    for _, i, j in sorted(pairs):
        if i not in used and not found[j]:
            used.add(i)
            found[j] = True
    return MatchResult(found, len(det) - len(used))
