"""Synthetic portraits with known geometry: a drawn head and shoulders whose crown, chin and eyes are exact."""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from deployments.faces.types import Face
from deployments.idphoto.matte import SELFIE_SIZE_PX, LowResMatte, Matting, letterbox
from deployments.idphoto.modnet import prepare_input


@dataclass(frozen=True, eq=False)
class SyntheticPortrait:
    rgb: np.ndarray
    mask: np.ndarray
    face: Face
    crown_y: float
    chin_y: float

    def low_matte(self, matting: Matting = "modnet") -> LowResMatte:
        """The matte a model would give, on that model's canvas, computed from the exact mask (no model needed)."""
        mask = np.dstack([self.mask] * 3)
        if matting == "selfie":
            square, affine = letterbox(mask, SELFIE_SIZE_PX)
            return LowResMatte(square[..., 0].astype(np.float32) / 255.0, affine, self.mask.shape, "selfie")
        prepared = prepare_input(mask)
        return LowResMatte((prepared.tensor[0] + 1.0) * 0.5, prepared.affine, self.mask.shape, "modnet")


def draw_portrait(
    width_px: int = 1200,
    height_px: int = 1600,
    centre_xy: tuple[float, float] = (600.0, 700.0),
    head_axes_px: tuple[float, float] = (170.0, 230.0),
    roll_deg: float = 0.0,
    background_rgb: tuple[int, int, int] = (90, 150, 90),
) -> SyntheticPortrait:
    """Head ellipse plus neck and shoulders on a textured background, optionally rolled about the head centre."""
    cx, cy = centre_xy
    ax, ay = head_axes_px
    rng = np.random.default_rng(0)
    rgb = np.empty((height_px, width_px, 3), np.uint8)
    rgb[:] = background_rgb
    rgb = np.clip(rgb.astype(np.int16) + rng.integers(-12, 13, rgb.shape), 0, 255).astype(np.uint8)
    mask = np.zeros((height_px, width_px), np.uint8)
    shoulders = np.array(
        [
            [cx - 2.1 * ax, height_px],
            [cx - 1.9 * ax, cy + 1.3 * ay],
            [cx + 1.9 * ax, cy + 1.3 * ay],
            [cx + 2.1 * ax, height_px],
        ],
        np.int32,
    )
    cv2.fillPoly(mask, [shoulders], 255)
    cv2.rectangle(mask, (int(cx - 0.45 * ax), int(cy)), (int(cx + 0.45 * ax), int(cy + 1.4 * ay)), 255, -1)
    cv2.ellipse(mask, (int(cx), int(cy)), (int(ax), int(ay)), 0, 0, 360, 255, -1)
    body = np.zeros_like(rgb)
    body[:] = (40, 50, 120)
    skin = np.zeros_like(rgb)
    skin[:] = (225, 180, 150)
    head = np.zeros((height_px, width_px), np.uint8)
    cv2.ellipse(head, (int(cx), int(cy)), (int(ax), int(ay)), 0, 0, 360, 255, -1)
    rgb = np.where(mask[..., None] > 0, body, rgb)
    rgb = np.where(head[..., None] > 0, skin, rgb)
    eyes = np.array([[cx - 0.42 * ax, cy - 0.1 * ay], [cx + 0.42 * ax, cy - 0.1 * ay]])
    for x, y in eyes:
        cv2.circle(rgb, (int(x), int(y)), int(0.09 * ax), (30, 30, 30), -1)
    cv2.ellipse(rgb, (int(cx), int(cy + 0.55 * ay)), (int(0.3 * ax), int(0.06 * ay)), 0, 0, 360, (170, 60, 60), -1)
    points = np.array(
        [
            *eyes,
            [cx, cy + 0.25 * ay],
            [cx - 0.3 * ax, cy + 0.55 * ay],
            [cx + 0.3 * ax, cy + 0.55 * ay],
            [cx, cy + ay],
            [cx, cy - ay],
        ]
    )
    if roll_deg:
        # Positive roll: the image-right eye ends up lower (clockwise on screen).
        rotation = cv2.getRotationMatrix2D((cx, cy), -roll_deg, 1.0)
        rgb = cv2.warpAffine(
            rgb, rotation, (width_px, height_px), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT
        )
        mask = cv2.warpAffine(mask, rotation, (width_px, height_px), flags=cv2.INTER_LINEAR)
        points = points @ rotation[:, :2].T + rotation[:, 2]
    landmarks = points[:5].astype(np.float32)
    chin, crown = points[5], points[6]
    box = (cx - ax, cy - 0.6 * ay, cx + ax, cy + ay)
    dx, dy = landmarks[1] - landmarks[0]
    face = Face(
        box=box,
        score=0.99,
        landmarks=landmarks,
        roll_deg=float(np.degrees(np.arctan2(dy, dx))),
        chin=(float(chin[0]), float(chin[1])),
    )
    return SyntheticPortrait(np.ascontiguousarray(rgb), mask, face, float(crown[1]), float(chin[1]))
