"""Generated clothes (``attire_engine=generative``, tier 1): the drawn template (tier 0) redrawn by the Renderer as
real cloth, the face and hair never touched.

The template is placed first (``dress``): it gives the redraw its start image, its colours and the region. The
region is the clothes' coverage widened a little (``REGION_GROW_E`` eye distances: the old collar's edge goes too),
inside the person's outline, less every face and hair pixel of the photo's parse. The Renderer inpaints that region
on a canvas cropped around the person (face included, for the pose), under the OpenPose skeleton drawn from the
landmarks and the matte's outline; the redraw comes back into the region only, feathered inward, so every pixel
outside it — face, hair, neck above the collar, background — is the dressed photo's own, bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from deployments.common.errors import InvalidParameter
from deployments.faces.types import Face
from deployments.idphoto.attire import AttireFit, AttireTemplate
from deployments.idphoto.parse import PortraitParse
from deployments.portrait.conditions import Canvas, draw_skeleton, outline_condition, pose_keypoints
from deployments.render.types import MIN_SIDE_PX, SIDE_MULTIPLE_PX

REDRAW_STEPS = 30
REDRAW_STRENGTH = 0.9  # the template's layout and colour kept, its drawing redrawn as cloth
REDRAW_SEED = 0  # the same photo and options give the same clothes
REDRAW_POSE_SCALE, REDRAW_OUTLINE_SCALE = 0.7, 0.5  # the ControlNets' weights: the pose holds, the outline guides
REGION_GROW_E = 0.15  # the coverage widened by this many eye distances
FEATHER_E = 0.05  # the redraw fades in over this much of the region's inner edge
CROP_MARGIN = 0.08  # of the crop's longer side, around the region and the faces
NEGATIVE_PROMPT = "cartoon, drawing, illustration, deformed, extra limbs, text, watermark, low quality, blurry"


@dataclass(frozen=True, eq=False)
class Redraw:
    """What the Renderer inpaints: the ``canvas`` (photo → render affine and size), its ``start`` image (the
    dressed photo there), ``mask`` (255 = redraw), the ``pose`` and ``outline`` conditions, the prompts; and
    ``region`` (photo-sized uint8, 255 where the redraw may land: never a face or hair pixel)."""

    canvas: Canvas
    start: np.ndarray
    mask: np.ndarray
    pose: np.ndarray
    outline: np.ndarray
    region: np.ndarray
    prompt: str
    negative_prompt: str = NEGATIVE_PROMPT


def attire_prompt(template: AttireTemplate, colour: str | None) -> str:
    """The Renderer's words for the clothes: the template's English title in its colour."""
    shade = colour or next(iter(template.colours), "")
    clothes = f"{shade.replace('-', ' ')} {template.title_en.lower()}".strip()
    return (
        f"ID photo of a person wearing a {clothes}, neatly tailored, realistic fabric with natural folds, "
        "studio lighting, sharp focus"
    )


def plan_redraw(
    dressed: np.ndarray,
    alpha: np.ndarray,
    fits: Sequence[AttireFit],
    parse: PortraitParse,
    prompt: str,
    side_px: int,
) -> Redraw:
    """The redraw of the clothes ``fits`` put on ``dressed`` (HxWx3 uint8 RGB, its matte ``alpha`` HxW uint8, the
    source's ``parse``), on a canvas whose longer side is about ``side_px``."""
    if not fits:
        raise InvalidParameter("generated clothes need a person dressed first")
    height, width = dressed.shape[:2]
    eye_px = min(fit.placement.eye_distance_px for fit in fits)
    cover = np.zeros((height, width), np.uint8)
    for fit in fits:
        cover = np.maximum(cover, fit.cover)
    grow = max(1, round(REGION_GROW_E * eye_px))
    grown = cv2.dilate(
        np.where(cover > 0, 255, 0).astype(np.uint8), cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * grow + 1,) * 2)
    )
    kept = parse.face_skin | parse.hair
    region = np.where((grown > 0) & (alpha >= 128) & ~kept, 255, 0).astype(np.uint8)
    canvas = _canvas_around(region, [fit.face for fit in fits], side_px)
    person = canvas.place(alpha, interpolation=cv2.INTER_LINEAR)
    skeleton = np.zeros((canvas.height, canvas.width, 3), np.uint8)
    for fit in fits:
        keypoints = pose_keypoints(fit.face, canvas, person)
        skeleton = np.maximum(skeleton, draw_skeleton(keypoints, (canvas.width, canvas.height)))
    mask = np.where(canvas.place(region, interpolation=cv2.INTER_LINEAR) >= 128, 255, 0).astype(np.uint8)
    return Redraw(canvas, canvas.place(dressed), mask, skeleton, outline_condition(person), region, prompt)


def paste_redraw(dressed: np.ndarray, drawn: np.ndarray, plan: Redraw, eye_px: float) -> np.ndarray:
    """``dressed`` with the canvas-sized ``drawn`` back inside ``plan.region`` (feathered inward over
    ``FEATHER_E``): outside the region the result is ``dressed``, bit for bit."""
    if drawn.shape != (plan.canvas.height, plan.canvas.width, 3):
        raise InvalidParameter(
            f"the redraw is {drawn.shape}, not the canvas's {plan.canvas.height}x{plan.canvas.width}"
        )
    inside = plan.region > 0
    ys, xs = np.nonzero(inside)
    out = dressed.copy()
    if len(ys) == 0:
        return out
    # Only the region's box (and the feather's reach around it) is warped and mixed: a large photo stays cheap.
    sigma = max(0.5, FEATHER_E * eye_px)
    pad = int(np.ceil(4 * sigma)) + 1
    height, width = dressed.shape[:2]
    top, bottom = max(int(ys.min()) - pad, 0), min(int(ys.max()) + pad + 1, height)
    left, right = max(int(xs.min()) - pad, 0), min(int(xs.max()) + pad + 1, width)
    back = cv2.invertAffineTransform(np.asarray(plan.canvas.matrix, np.float64))
    back[:, 2] -= (left, top)  # canvas → this box of the photo
    box = (slice(top, bottom), slice(left, right))
    photo = cv2.warpAffine(
        drawn, back, (right - left, bottom - top), flags=cv2.INTER_CUBIC, borderMode=cv2.BORDER_REPLICATE
    )
    kept = inside[box]
    feather = cv2.GaussianBlur(kept.astype(np.float32), (0, 0), sigma)
    weight = np.where(kept, np.clip(2.0 * feather - 1.0, 0.0, 1.0), 0.0).astype(np.float32)[..., None]  # 1 inward
    base = dressed[box].astype(np.float32)
    mixed = np.clip(np.rint(base + (photo.astype(np.float32) - base) * weight), 0, 255).astype(np.uint8)
    out[box] = np.where(kept[..., None], mixed, dressed[box])
    return out


def _canvas_around(region: np.ndarray, faces: Sequence[Face], side_px: int) -> Canvas:
    """A canvas over the region and the faces (their pose), with a margin, scaled so its longer side is about
    ``side_px`` and each side a multiple of ``SIDE_MULTIPLE_PX``."""
    height, width = region.shape
    ys, xs = np.nonzero(region)
    if len(xs) == 0:
        raise InvalidParameter("the clothes' region is empty: nothing to redraw")
    x0, y0, x1, y1 = float(xs.min()), float(ys.min()), float(xs.max() + 1), float(ys.max() + 1)
    for face in faces:
        x0, y0 = min(x0, float(face.box[0])), min(y0, float(face.box[1]))
        x1, y1 = max(x1, float(face.box[2])), max(y1, float(face.box[3]))
    margin = CROP_MARGIN * max(x1 - x0, y1 - y0)
    x0, y0 = max(0.0, x0 - margin), max(0.0, y0 - margin)
    x1, y1 = min(float(width), x1 + margin), min(float(height), y1 + margin)
    scale = side_px / max(x1 - x0, y1 - y0)
    size_w = max(MIN_SIDE_PX, round((x1 - x0) * scale / SIDE_MULTIPLE_PX) * SIDE_MULTIPLE_PX)
    size_h = max(MIN_SIDE_PX, round((y1 - y0) * scale / SIDE_MULTIPLE_PX) * SIDE_MULTIPLE_PX)
    scale_x, scale_y = size_w / (x1 - x0), size_h / (y1 - y0)
    matrix = np.array([[scale_x, 0.0, -x0 * scale_x], [0.0, scale_y, -y0 * scale_y]])
    matrix.setflags(write=False)
    return Canvas(width=size_w, height=size_h, matrix=matrix)
