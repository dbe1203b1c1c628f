"""What a generated portrait is conditioned on, computed from what the face and matting stages already found (no
annotator downloads): where the photo lands on the render (:class:`Canvas`), an OpenPose skeleton and a Canny outline
for the ControlNets, the aligned face the IP-Adapter sees, and the person's own face pasted back onto the render.

Image contract: HxWx3 uint8 RGB; mattes HxW uint8 (255 = person), canvas-sized. Points are pixel-index coordinates
(pixel centres at integers, :mod:`deployments.common.affine`). The person's right is the image's left: COCO-18's right
eye, ear and shoulder are the image-left ones of a person facing the camera.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass

import cv2
import numpy as np

from deployments.common.affine import apply_affine, compose_affine, invert_affine, pixel_scale_affine
from deployments.common.errors import InvalidParameter
from deployments.common.image import require_image
from deployments.faces.align import align_face, get_template, rescale_crop_matrix
from deployments.faces.paste import paste_back
from deployments.faces.types import Face

EYE_LINE_FRAC = 0.38  # of the canvas height, from the top: a headshot's eye line

# OpenPose COCO-18 keypoints (only those a face and a matte tell us) and controlnet_aux's palette and limb order:
# limb i is drawn in colour i, keypoint k in colour k, so the ControlNet reads each part by its colour.
NOSE, NECK, RIGHT_SHOULDER, LEFT_SHOULDER, RIGHT_EYE, LEFT_EYE, RIGHT_EAR, LEFT_EAR = 0, 1, 2, 5, 14, 15, 16, 17
OPENPOSE_COLORS: tuple[tuple[int, int, int], ...] = (
    (255, 0, 0), (255, 85, 0), (255, 170, 0), (255, 255, 0), (170, 255, 0), (85, 255, 0),
    (0, 255, 0), (0, 255, 85), (0, 255, 170), (0, 255, 255), (0, 170, 255), (0, 85, 255),
    (0, 0, 255), (85, 0, 255), (170, 0, 255), (255, 0, 255), (255, 0, 170), (255, 0, 85),
)  # fmt: skip
OPENPOSE_LIMBS: tuple[tuple[int, int], ...] = (
    (1, 2), (1, 5), (2, 3), (3, 4), (5, 6), (6, 7), (1, 8), (8, 9), (9, 10),
    (1, 11), (11, 12), (12, 13), (1, 0), (0, 14), (14, 16), (0, 15), (15, 17),
)  # fmt: skip
LIMB_ALPHA = 0.6  # limbs are drawn at 0.6 of their colour on black, keypoints at full colour
SKELETON_REFERENCE_PX = 512  # the canvas side at which limbs and keypoints have the sizes below
STICK_HALF_WIDTH_PX = 4  # a limb ellipse's minor semi-axis at the reference side
KEYPOINT_RADIUS_PX = 4

# Where the body sits relative to the face (a frontal, upright sitter): ears on the eye line, this many eye distances
# from the eyes' midpoint; the neck (COCO's shoulder midpoint) below the chin, shoulders level with it, in face widths
# (the detector box's width, which turning the head changes less than the eye distance).
EAR_FROM_EYE_MIDPOINT = 1.1
NECK_BELOW_CHIN = 0.65
SHOULDER_HALF_SPAN = 1.25  # neck to shoulder joint when no matte says otherwise
SHOULDER_HALF_SPAN_RANGE = (0.9, 1.8)  # what a matte's width may make it (a matte touching the border, an arm)
SHOULDER_ROW_BELOW_NECK = 0.25  # the matte's width is read this far below the neck, where the shoulders are full
SHOULDER_INSET = 0.3  # from the silhouette's edge in to the joint

OUTLINE_CANNY_THRESHOLDS = (100, 200)
ADAPTER_FACE_PX = 224  # the IP-Adapter's CLIP image encoder input side
FACE_TEMPLATE = "ffhq-512"  # the adapter's crop and keep_face's, the restorers' template too

# keep_face's mask on the ffhq-512 crop, as fractions of its side: an ellipse over the inner face (brows to chin, cheek
# to cheek), fully opaque inside FACE_CORE of its radii (eyes, nose, mouth), a smoothstep ramp to 0 at its edge.
FACE_ELLIPSE_CENTRE = (0.5, 0.625)
FACE_ELLIPSE_AXES = (0.275, 0.315)  # semi-axes, across and down
FACE_CORE = 0.75


@dataclass(frozen=True, eq=False)
class Canvas:
    """Where the photo lands in the render: the render's size and the 2x3 photo-pixel -> canvas-pixel affine."""

    width: int
    height: int
    matrix: np.ndarray  # 2x3 float64, photo -> canvas (a scale and a translation)

    @property
    def scale(self) -> float:
        """Canvas pixels per photo pixel."""
        return math.sqrt(abs(float(np.linalg.det(self.matrix[:, :2]))))

    def resized(self, width: int, height: int) -> Canvas:
        """The same framing on a render of another size (a Hires. fix pass, a size rounded for the model)."""
        to_size = pixel_scale_affine(width / self.width, height / self.height)
        matrix = compose_affine(to_size, self.matrix)
        matrix.setflags(write=False)
        return Canvas(width=width, height=height, matrix=matrix)

    def place(self, rgb: np.ndarray, *, interpolation: int = cv2.INTER_AREA) -> np.ndarray:
        """The photo (HxWx3) or a matte (HxW) warped onto the canvas, edges replicated.

        ``cv2.warpAffine`` has no area filter, so ``INTER_AREA`` resizes by the matrix's scale first (which keeps the
        same pixel-centre map) and then only shifts: by whole pixels for a :func:`fit_canvas` canvas, an exact copy.
        """
        matrix, size = np.asarray(self.matrix, dtype=np.float64), (self.width, self.height)
        if interpolation == cv2.INTER_AREA and _is_scale_and_shift(matrix):
            scale_x, scale_y = float(matrix[0, 0]), float(matrix[1, 1])
            rgb = cv2.resize(rgb, None, fx=scale_x, fy=scale_y, interpolation=cv2.INTER_AREA)
            matrix = compose_affine(matrix, invert_affine(pixel_scale_affine(scale_x, scale_y)))
            interpolation = cv2.INTER_LINEAR
        return cv2.warpAffine(rgb, matrix, size, flags=interpolation, borderMode=cv2.BORDER_REPLICATE)

    def map_points(self, points_xy: np.ndarray) -> np.ndarray:
        """``(N, 2)`` photo pixels -> canvas pixels."""
        return apply_affine(self.matrix, np.asarray(points_xy, dtype=np.float64).reshape(-1, 2))


def fit_canvas(photo_wh: tuple[int, int], face: Face, size_wh: tuple[int, int]) -> Canvas:
    """Cover-fit: the photo scaled to cover the canvas (no empty border), shifted so the face is centred across and
    its eye line sits at EYE_LINE_FRAC (~0.38) of the height where the photo allows (clamped to stay inside).

    The shift is rounded to whole canvas pixels, so :meth:`Canvas.place` is a resize and a crop (no second blur).
    """
    photo_w, photo_h = photo_wh
    width, height = size_wh
    if min(photo_w, photo_h, width, height) < 1:
        raise InvalidParameter(f"photo {photo_w}x{photo_h} and canvas {width}x{height} must be at least 1 px a side")
    scale = max(width / photo_w, height / photo_h)
    marks = np.asarray(face.landmarks, dtype=np.float64)
    centre_x = float(marks[[0, 1, 3, 4], 0].mean())  # eyes and mouth corners: the nose tip leans with a turned head
    eye_y = float(marks[:2, 1].mean())
    shift_x = _whole_pixel_shift(scale, photo_w, width, at=centre_x, target=(width - 1) / 2)
    shift_y = _whole_pixel_shift(scale, photo_h, height, at=eye_y, target=EYE_LINE_FRAC * height - 0.5)
    matrix = pixel_scale_affine(scale, shift_xy=(shift_x, shift_y))
    matrix.setflags(write=False)
    return Canvas(width=width, height=height, matrix=matrix)


def _whole_pixel_shift(scale: float, photo_px: int, canvas_px: int, *, at: float, target: float) -> float:
    """The whole-pixel shift after the resize that moves photo index ``at`` nearest ``target`` while the resized photo
    still covers the canvas (from ``canvas_px - scale * photo_px`` up to 0)."""
    resized_at = scale * at + 0.5 * scale - 0.5
    lowest = math.ceil(canvas_px - scale * photo_px - 1e-6)
    return float(min(max(round(target - resized_at), lowest), 0))


def _is_scale_and_shift(matrix: np.ndarray) -> bool:
    return matrix[0, 1] == 0.0 and matrix[1, 0] == 0.0 and matrix[0, 0] > 0.0 and matrix[1, 1] > 0.0


def pose_condition(face: Face, canvas: Canvas, matte: np.ndarray | None) -> np.ndarray:
    """HxWx3 uint8: an OpenPose (COCO-18) skeleton on black in controlnet_aux's palette and limb order, drawn from the
    face's landmarks mapped to the canvas: nose, eyes, ears (from the eye line, outward), neck (below the chin),
    shoulders (from the canvas-sized uint8 `matte`'s width at shoulder height, or from the face width when there is no
    matte or it is empty there). Limb width scales with the canvas."""
    return draw_skeleton(pose_keypoints(face, canvas, matte), (canvas.width, canvas.height))


def pose_keypoints(face: Face, canvas: Canvas, matte: np.ndarray | None) -> dict[int, np.ndarray]:
    """The COCO-18 keypoints :func:`pose_condition` draws, by index, in canvas pixels."""
    if matte is not None and (matte.shape != (canvas.height, canvas.width) or matte.dtype != np.uint8):
        raise InvalidParameter(
            f"matte must be a {canvas.width}x{canvas.height} uint8 array (the canvas), got {matte.shape} {matte.dtype}"
        )
    marks = canvas.map_points(face.landmarks)
    image_left_eye, image_right_eye, nose = marks[0], marks[1], marks[2]
    eye_px = float(np.linalg.norm(image_right_eye - image_left_eye))
    along = (image_right_eye - image_left_eye) / eye_px if eye_px > 0 else np.array([1.0, 0.0])
    eyes_middle = (image_left_eye + image_right_eye) / 2
    face_px = (face.box[2] - face.box[0]) * canvas.scale
    neck = canvas.map_points(np.array([face.chin]))[0] + (0.0, NECK_BELOW_CHIN * face_px)
    left_span, right_span = _shoulder_half_spans(matte, neck, face_px)
    return {
        NOSE: nose,
        NECK: neck,
        RIGHT_SHOULDER: neck - (left_span, 0.0),
        LEFT_SHOULDER: neck + (right_span, 0.0),
        RIGHT_EYE: image_left_eye,
        LEFT_EYE: image_right_eye,
        RIGHT_EAR: eyes_middle - along * EAR_FROM_EYE_MIDPOINT * eye_px,
        LEFT_EAR: eyes_middle + along * EAR_FROM_EYE_MIDPOINT * eye_px,
    }


def _shoulder_half_spans(matte: np.ndarray | None, neck: np.ndarray, face_px: float) -> tuple[float, float]:
    """Neck to the image-left and image-right shoulder joints: the matte's run through the neck's column, read a
    little below the neck, less the inset, within the plausible range; the face-width default where the matte is
    absent or not the person there."""
    default = SHOULDER_HALF_SPAN * face_px
    if matte is None:
        return default, default
    row, column = round(neck[1] + SHOULDER_ROW_BELOW_NECK * face_px), round(neck[0])
    if not (0 <= row < matte.shape[0] and 0 <= column < matte.shape[1]) or matte[row, column] < 128:
        return default, default
    background = matte[row] < 128
    before, after = np.flatnonzero(background[:column]), np.flatnonzero(background[column:])
    left_edge = before[-1] + 1 if len(before) else 0
    right_edge = column + after[0] - 1 if len(after) else matte.shape[1] - 1
    lowest, highest = (bound * face_px for bound in SHOULDER_HALF_SPAN_RANGE)
    inset = SHOULDER_INSET * face_px
    left = float(np.clip(neck[0] - left_edge - inset, lowest, highest))
    right = float(np.clip(right_edge - neck[0] - inset, lowest, highest))
    return left, right


def draw_skeleton(keypoints: Mapping[int, np.ndarray], size_wh: tuple[int, int]) -> np.ndarray:
    """HxWx3 uint8: the limbs whose both ends are known, then every keypoint, as controlnet_aux draws a body; sizes
    scale with the canvas's longer side."""
    width, height = size_wh
    canvas = np.zeros((height, width, 3), np.uint8)
    unit = max(width, height) / SKELETON_REFERENCE_PX
    half_width, radius = max(1, round(STICK_HALF_WIDTH_PX * unit)), max(1, round(KEYPOINT_RADIUS_PX * unit))
    for (start, end), colour in zip(OPENPOSE_LIMBS, OPENPOSE_COLORS):
        if start in keypoints and end in keypoints:
            a, b = np.asarray(keypoints[start], np.float64), np.asarray(keypoints[end], np.float64)
            centre, delta = (a + b) / 2, b - a
            angle_deg = round(math.degrees(math.atan2(delta[1], delta[0])))
            axes = (round(float(np.linalg.norm(delta)) / 2), half_width)
            polygon = cv2.ellipse2Poly(_pixel(centre), axes, angle_deg, 0, 360, 1)
            cv2.fillConvexPoly(canvas, polygon, tuple(int(c * LIMB_ALPHA) for c in colour))
    for index in sorted(keypoints):
        cv2.circle(canvas, _pixel(keypoints[index]), radius, OPENPOSE_COLORS[index], thickness=-1)
    return canvas


def _pixel(point: np.ndarray) -> tuple[int, int]:
    return round(float(point[0])), round(float(point[1]))


def outline_condition(matte: np.ndarray) -> np.ndarray:
    """HxWx3 uint8: OpenCV Canny edges of the person's outline (the canvas-sized matte thresholded at 128), white on
    black. The gradient reflects at the border, so where the person leaves the canvas there is no line."""
    if matte.ndim != 2 or matte.dtype != np.uint8:
        raise InvalidParameter(f"matte must be an HxW uint8 array, got {matte.shape} {matte.dtype}")
    person = np.where(matte >= 128, 255, 0).astype(np.uint8)
    edges = cv2.Canny(person, *OUTLINE_CANNY_THRESHOLDS)
    return cv2.cvtColor(edges, cv2.COLOR_GRAY2RGB)


def adapter_face(rgb: np.ndarray, face: Face) -> np.ndarray:
    """The face aligned to the ffhq-512 template and resized to ADAPTER_FACE_PX (what the IP-Adapter's CLIP encoder
    sees): the whole face, eyes level, whatever its size in the photo."""
    require_image(rgb, what="adapter face photo")
    crop = align_face(rgb, face.landmarks, FACE_TEMPLATE).crop
    return cv2.resize(crop, (ADAPTER_FACE_PX, ADAPTER_FACE_PX), interpolation=cv2.INTER_AREA)


def keep_face(
    generated: np.ndarray, photo: np.ndarray, face: Face, canvas: Canvas, *, face_crop: np.ndarray | None = None
) -> np.ndarray:
    """The person's own face (from `photo`, aligned to ffhq-512) pasted onto `generated` (the canvas-sized render)
    where the canvas puts it, through a feathered elliptical mask over the inner face (brows to chin, cheek to cheek;
    fully opaque inside FACE_CORE, ramping to 0 at its edge, 0 outside); everything outside the mask unchanged.

    ``face_crop``, when given, replaces the plain aligned crop: the restorer's output for the same ffhq-512 alignment
    (any square side), so what is pasted is the restored face.
    """
    require_image(generated, what="generated portrait")
    require_image(photo, what="portrait photo")
    if generated.shape[:2] != (canvas.height, canvas.width):
        raise InvalidParameter(
            f"generated image is {generated.shape[1]}x{generated.shape[0]}, the canvas {canvas.width}x{canvas.height}"
        )
    template = get_template(FACE_TEMPLATE)
    if face_crop is None:
        aligned = align_face(photo, face.landmarks, template)
        face_crop, photo_to_crop = aligned.crop, aligned.matrix
    else:
        require_image(face_crop, what="restored face crop")
        photo_to_crop = rescale_crop_matrix(template.fit(face.landmarks), template.size_px, face_crop.shape[0])
    canvas_to_crop = compose_affine(photo_to_crop, invert_affine(canvas.matrix))
    return paste_back(generated, [(face_crop, canvas_to_crop)], mask=face_paste_mask(face_crop.shape[0]))


def face_core(canvas: Canvas, face: Face) -> np.ndarray:
    """HxW bool: the canvas pixels where keep_face's mask is fully opaque (what the test and the report call the face
    region).

    A pixel counts when every crop pixel its bilinear sample reads (within 1 px on each axis, plus OpenCV's 1/32 px
    coordinate rounding) is in the core.
    """
    template = get_template(FACE_TEMPLATE)
    canvas_to_crop = compose_affine(template.fit(face.landmarks), invert_affine(canvas.matrix))
    rows, columns = np.indices((canvas.height, canvas.width), dtype=np.float64)
    crop_xy = apply_affine(canvas_to_crop, np.stack([columns.ravel(), rows.ravel()], axis=1))
    reach = 1.5 / (min(FACE_ELLIPSE_AXES) * template.size_px)
    radius = _ellipse_radius(crop_xy, template.size_px) + reach
    return (radius <= FACE_CORE).reshape(canvas.height, canvas.width)


@functools.lru_cache(maxsize=4)
def face_paste_mask(side_px: int) -> np.ndarray:
    """Crop-sized float32 mask (read-only): 1 inside FACE_CORE of the face ellipse, a smoothstep ramp to 0 at its
    edge."""
    rows, columns = np.indices((side_px, side_px), dtype=np.float64)
    radius = _ellipse_radius(np.stack([columns.ravel(), rows.ravel()], axis=1), side_px).reshape(side_px, side_px)
    ramp = np.clip((1.0 - radius) / (1.0 - FACE_CORE), 0.0, 1.0)
    mask = (ramp * ramp * (3.0 - 2.0 * ramp)).astype(np.float32)
    mask.setflags(write=False)
    return mask


def _ellipse_radius(crop_xy: np.ndarray, side_px: int) -> np.ndarray:
    """Each crop point's normalised radius in the face ellipse: 1 on its edge."""
    centre = (np.asarray(FACE_ELLIPSE_CENTRE) * side_px) - 0.5  # fractions of the side are in pixel-edge units
    axes = np.asarray(FACE_ELLIPSE_AXES) * side_px
    return np.sqrt((((crop_xy - centre) / axes) ** 2).sum(axis=1))
