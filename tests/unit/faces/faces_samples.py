"""Test samples: astronaut reference geometry and a synthetic group photo of many small real faces."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

# Astronaut (skimage, 512x512): face box and eye centres measured by the face mesh on the clean photo.
ASTRONAUT_BOX = (177.0, 80.0, 272.0, 175.0)
ASTRONAUT_EYES = np.array([[203.7, 100.9], [246.9, 103.5]])

# FFHQ-aligned crops (facexlib template): eyes at (193, 240) and (319, 240) of 512.
FFHQ_EYES_PER_SIDE = np.array([[192.98, 239.95], [318.90, 240.19]]) / 512.0


def face_sources(shared_faces_dir: Path | None, astronaut_rgb: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """(square face crop, eye points in crop pixels) pairs: the shared FFHQ-aligned crops, else the astronaut."""
    sources = []
    if shared_faces_dir is not None and shared_faces_dir.is_dir():
        for path in sorted(shared_faces_dir.glob("*.png")):
            bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
            if bgr is not None and bgr.shape[0] == bgr.shape[1]:
                sources.append((cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB), FFHQ_EYES_PER_SIDE * bgr.shape[0]))
    if not sources:
        # astronaut: a square around the face with eyes near (204, 101) and (247, 107) of the 512 photo
        crop = np.ascontiguousarray(astronaut_rgb[30:230, 125:325])
        sources.append((crop, np.array([[204.0 - 125, 101.0 - 30], [247.0 - 125, 107.0 - 30]])))
    return sources


def make_group_photo(
    sources: list[tuple[np.ndarray, np.ndarray]], *, faces: int = 30, seed: int = 0
) -> tuple[np.ndarray, list[np.ndarray]]:
    """Faces on a 6-column grid, eye distance 15–20 px, on smooth coloured noise. Returns the photo and, per face,
    its true eye points."""
    rng = np.random.default_rng(seed)
    columns, cell_px = 6, 112
    rows = -(-faces // columns)
    height, width = rows * cell_px + 40, columns * cell_px + 40
    noise = rng.integers(0, 255, size=(height // 16 + 1, width // 16 + 1, 3), dtype=np.uint8)
    photo = cv2.resize(noise, (width, height), interpolation=cv2.INTER_CUBIC)
    truths = []
    for index in range(faces):
        crop, eyes = sources[index % len(sources)]
        eye_px = rng.uniform(15.0, 20.0)
        scale = eye_px / float(np.linalg.norm(eyes[1] - eyes[0]))
        side = max(8, round(crop.shape[0] * scale))
        small = cv2.resize(crop, (side, side), interpolation=cv2.INTER_AREA)
        row, column = divmod(index, columns)
        x0 = 20 + column * cell_px + int(rng.integers(0, max(1, cell_px - side)))
        y0 = 20 + row * cell_px + int(rng.integers(0, max(1, cell_px - side)))
        photo[y0 : y0 + side, x0 : x0 + side] = small
        truths.append(eyes * (side / crop.shape[0]) + np.array([x0, y0]))
    return photo, truths
