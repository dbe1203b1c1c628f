"""Formal clothes on an ID photo (换正装), tier 0: templates drawn by code, placed by the face and the matte.

A template is a transparent drawing of clothes at a reference scale (``REFERENCE_EYE_PX`` pixels between the eyes)
with three anchors: the collar's centre (where the neck meets the collar), the neck width and the shoulder width.
:func:`dress` scales it by the eye distance, turns it by the eye line's roll, centres its collar under the chin
with its top at the base of the neck (just below the chin, higher where the person's own collar starts higher: the
neck is read by the face's skin colour), stretches it sideways to the person's neck and shoulders (per side) and
drapes its shoulders onto the person's outline (the matte) between natural slopes, over the person's own clothes.
Only pixels below the neck line (``NECK_LINE_E`` eye distances below the lowest point of the face, along its vertical
axis) may change, so the face, the hair above it and the neck above the collar stay the person's own pixels, bit for
bit; given the photo's parse (:mod:`deployments.idphoto.parse`), so does the hair that falls in front of the
shoulders. :class:`Dressed` says where the clothes went (:class:`AttireFit`), for the report's seam check.

The built-in templates are drawn here (no copied assets): anti-aliased polygons in eye-distance units on a canvas
``SUPERSAMPLE`` times finer (1: about 0.1 s a drawing on one core), with soft gradients and fold shadows. Users add
templates as a folder of ``<name>.png`` (RGBA, the clothes at any scale) and ``<name>.json`` (titles, anchors,
optional colours), validated at start by :func:`load_attire_templates`.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np
from PIL import Image
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from deployments.common.errors import InternalError, InvalidParameter
from deployments.faces.types import Face
from deployments.idphoto.parse import PortraitParse, chin_patch, skin_like, skin_reference, ycrcb

RGB = tuple[int, int, int]

REFERENCE_EYE_PX = 80  # built-in drawings' eye distance
SUPERSAMPLE = 1  # built-ins are painted this many times finer, then area-shrunk (1: anti-aliased polygons)
# Everything below is in eye distances (E): about 6.3 cm on an adult, so a neck is ~1.8 E wide, shoulders ~6 E.
NECK_LINE_E = 0.06  # nothing at or above this far below the lowest point of the face changes
NECK_BASE_E = 0.3  # the collar's top (its wings at the neck's sides) at most this far below the face
NECK_PER_FACE_WIDTH = 0.8  # a neck is about this much of the face's width (cheek to cheek)
NECK_HALF_RANGE_E = (0.7, 1.05)
SHOULDER_HALF_RANGE_E = (2.4, 4.4)  # per side: the outline's edge less 0.2 E
_NECK_HALF_E = 0.85  # the built-ins' neck and shoulder half-widths before fitting
_SHOULDER_HALF_E = 3.1
_CANVAS_X_E = 4.6  # the built-ins' canvas: x in [-4.6, 4.6], y in [-0.3, 5.2] around the collar
_CANVAS_Y_E = (-0.3, 5.2)
_PROFILE_PX_PER_E = 10  # resolution of the matte profile the fit reads
_PROFILE_HALF_COLS = 6 * _PROFILE_PX_PER_E
SHOULDER_SLOPE_DEG = (15.0, 25.0)  # a shoulder line falls from the neck's sides between these slopes
_COLLAR_ROLL_E = 0.3  # beside the neck a jacket's collar may stay level this far before the shoulder falls
DRAPE_RANGE_E = (-1.2, 0.8)  # how far a column of the drawing may move up (-) or down (+) to meet the shoulders
HAIR_EDGE_E = 0.04  # the soft edge (Gaussian sigma) of hair kept in front of the clothes
_NECK_GRID_E = 0.05  # the neck's skin is read on a grid this fine
_SKIN_BIN_E = 0.05  # the neck's colour is read in columns this wide
_SKIN_FADE_E = 0.12  # an opening's skin fades in over this much below the neck line (no seam against the real neck)
_SKIN_LIGHTEN_E, _SKIN_LIGHTEN_MAX = 0.5, 0.35  # down the opening, out of the chin's shadow: towards the lit skin
_SLUG = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}$")


@dataclass(frozen=True, eq=False)
class AttireDrawing:
    """One template in one colour at its reference scale: premultiplied RGBA (HxWx4 uint8), the skin the clothes'
    opening shows (HxWx2 uint8: coverage, coverage x shade; filled with the person's own neck colour), the collar's
    centre and the neck and shoulder widths (pixels of this drawing), and its eye distance."""

    rgba: np.ndarray
    skin: np.ndarray
    collar_xy: tuple[float, float]
    neck_width_px: float
    shoulder_width_px: float
    eye_distance_px: float


@dataclass(frozen=True, eq=False)
class AttireTemplate:
    """A named set of clothes: titles, the colours offered (name -> RGB; empty: one look, as drawn), and how one
    colour is drawn."""

    name: str
    title_zh: str
    title_en: str
    colours: Mapping[str, RGB]
    draw: Callable[[RGB | None], AttireDrawing]
    builtin: bool = True

    def drawing(self, colour: str | None = None) -> AttireDrawing:
        """The drawing in ``colour`` (None: the first colour offered)."""
        if colour is None:
            return self.draw(next(iter(self.colours.values()), None))
        if colour not in self.colours:
            offered = ", ".join(self.colours) or "none (it is drawn in its own colours)"
            raise InvalidParameter(
                f"attire {self.name} has no colour {colour!r}; colours offered: {offered}",
                details={"attire": self.name, "colour": colour, "colours": list(self.colours)},
            )
        return self.draw(self.colours[colour])

    def to_json(self) -> dict:
        """``GET /v1/idphoto/attire``: the slug, its titles, its colours and the tiers that draw it (0: drawn, on a
        CPU; 1: the drawing redrawn as cloth by the Renderer, ``attire_engine=generative``)."""
        return {
            "name": self.name,
            "title": {"zh": self.title_zh, "en": self.title_en},
            "colours": {name: "#%02x%02x%02x" % rgb for name, rgb in self.colours.items()},
            "tiers": [0, 1],
        }


@dataclass(frozen=True, eq=False)
class AttirePlacement:
    """Where a template lands on one photo: the collar's centre (photo pixels), the face's axes (unit vectors:
    right and down), the eye distance, and the fit (eye distances): the collar below the chin, the neck line below
    the chin, the neck's and shoulders' half-widths (the wider side; per side: image-left, image-right), the collar's
    top below the chin, and how far each column of the drawing moves down to meet the
    shoulders (``_PROFILE_PX_PER_E`` columns per E around the collar)."""

    collar_xy: tuple[float, float]
    right: tuple[float, float]
    down: tuple[float, float]
    eye_distance_px: float
    drop_e: float
    neck_line_e: float
    neck_half_e: float
    shoulder_half_e: float
    collar_top_e: float = NECK_BASE_E
    neck_halves_e: tuple[float, float] = (_NECK_HALF_E, _NECK_HALF_E)
    shoulder_halves_e: tuple[float, float] = (_SHOULDER_HALF_E, _SHOULDER_HALF_E)
    drape_e: np.ndarray = field(default_factory=lambda: np.zeros(2 * _PROFILE_HALF_COLS + 1), repr=False)


# ---------------------------------------------------------------------------------------------------------------
# Placement and compositing


def place_attire(
    alpha: np.ndarray,
    face: Face,
    drawing: AttireDrawing,
    *,
    mesh: np.ndarray | None = None,
    rgb: np.ndarray | None = None,
) -> AttirePlacement:
    """Fit ``drawing`` to the person: scale and roll from the eyes, the collar centred under the chin, its top at
    the base of the neck, the neck's and shoulders' widths per side, and each column of the drawing outside the neck
    moved up or down so its top meets the person's shoulder line.

    The face is the lowest point of the chin (or of ``mesh`` along the face's vertical axis). The neck line sits
    ``NECK_LINE_E`` below it: nothing above changes. The collar's top (where its wings meet the neck's sides) sits
    ``NECK_BASE_E`` below the face, higher where ``rgb`` shows the person's own clothes starting higher on the neck's
    sides (the matte of an ID photo rarely shows a neck's outline: a collar, hair or the shoulders meet the jaw, so
    the neck is measured by the face's skin colour running down it). The shoulder line runs from the neck's sides
    down at ``SHOULDER_SLOPE_DEG``, following the person's outline (the matte) between those slopes.
    """
    eyes = np.asarray(face.landmarks[:2], dtype=np.float64)
    eye_px = float(np.linalg.norm(eyes[1] - eyes[0]))
    if eye_px < 2.0:
        raise InvalidParameter("the face is too small to dress", details={"eye_distance_px": eye_px})
    right = (eyes[1] - eyes[0]) / eye_px
    down = np.array([-right[1], right[0]])
    chin = np.asarray(face.chin, dtype=np.float64)
    points = mesh if mesh is not None else face.mesh
    below_chin_e = 0.0
    if points is not None:
        below_chin_e = max(0.0, float(((np.asarray(points, np.float64) - chin) @ down).max()) / eye_px)
    neck_line_e = NECK_LINE_E + below_chin_e
    prior_half = _neck_half_e(face, points, right, eye_px)
    neck_halves = (prior_half, prior_half)
    collar_top_e = NECK_BASE_E
    if rgb is not None:
        neck_halves, collar_top_e = _measure_neck(rgb, face, chin, right, down, eye_px, below_chin_e, prior_half)
    collar_top_e = float(np.clip(collar_top_e, NECK_LINE_E + 0.02, NECK_BASE_E)) + below_chin_e
    inside = _profile(alpha, chin, right, down, eye_px)
    centre = inside.shape[1] // 2
    rows_e = np.arange(inside.shape[0]) / _PROFILE_PX_PER_E
    shoulder_rows = (rows_e >= 1.5 + below_chin_e) & (rows_e <= 3.5 + below_chin_e)
    shoulders = tuple(
        float(
            np.clip(
                np.percentile(_run_length(side[shoulder_rows]), 75) / _PROFILE_PX_PER_E - 0.2, *SHOULDER_HALF_RANGE_E
            )
        )
        for side in (inside[:, centre::-1], inside[:, centre:])
    )
    drop = collar_top_e - _collar_top_in_drawing_e(drawing)
    collar = chin + drop * eye_px * down
    placement = AttirePlacement(
        collar_xy=(float(collar[0]), float(collar[1])),
        right=(float(right[0]), float(right[1])),
        down=(float(down[0]), float(down[1])),
        eye_distance_px=eye_px,
        drop_e=drop,
        neck_line_e=neck_line_e,
        neck_half_e=float(max(neck_halves)),
        shoulder_half_e=float(max(shoulders)),
        collar_top_e=collar_top_e,
        neck_halves_e=(float(neck_halves[0]), float(neck_halves[1])),
        shoulder_halves_e=shoulders,
    )
    return dataclasses.replace(placement, drape_e=_drape_e(inside, rows_e, placement, drawing))


def _collar_top_in_drawing_e(drawing: AttireDrawing) -> float:
    """How far above its collar's centre (E, negative: above) the drawing's clothes begin over the neck."""
    neck = drawing.neck_width_px / 2
    left = max(0, int(drawing.collar_xy[0] - neck - 0.2 * drawing.eye_distance_px))
    right = int(drawing.collar_xy[0] + neck + 0.2 * drawing.eye_distance_px) + 1
    opaque = (drawing.rgba[:, left:right, 3] >= 128).any(axis=1)
    if not opaque.any():
        return 0.0
    return float((np.argmax(opaque) - drawing.collar_xy[1]) / drawing.eye_distance_px)


def _measure_neck(
    rgb: np.ndarray,
    face: Face,
    chin: np.ndarray,
    right: np.ndarray,
    down: np.ndarray,
    eye_px: float,
    below_chin_e: float,
    prior_half_e: float,
) -> tuple[tuple[float, float], float]:
    """The neck's half-widths (image-left, image-right) and how far below the face (E) the person's own clothes
    begin at the neck's sides, read on a grid of the face frame by the face's skin colour (chroma near the skin's
    between the mouth and the chin, not much darker): the skin's run sideways just under the chin gives the widths;
    down the neck's sides, the first rows that are not skin are the person's collar (or hair: then the collar goes
    as high as it may)."""
    step = _NECK_GRID_E
    us = np.arange(-1.4, 1.4 + step / 2, step)
    vs = below_chin_e + np.arange(0.0, NECK_BASE_E + 0.2 + step / 2, step)
    grid = chin + (us[None, :, None] * right + vs[:, None, None] * down) * eye_px
    samples = cv2.remap(
        rgb,
        grid[..., 0].astype(np.float32),
        grid[..., 1].astype(np.float32),
        cv2.INTER_LINEAR,
        borderMode=cv2.BORDER_REPLICATE,
    )
    patch = chin_patch(rgb, face)
    if patch.size == 0:
        return (prior_half_e, prior_half_e), NECK_BASE_E
    skin = skin_like(ycrcb(samples), skin_reference(patch))
    centre = us.size // 2
    top_rows = vs <= below_chin_e + 0.25
    halves = []
    for side in (skin[top_rows, centre::-1], skin[top_rows, centre:]):
        gap = ~side[:, 1:] & ~side[:, :-1]  # two samples in a row that are not skin end the run
        run = np.where(gap.any(axis=1), np.argmax(gap, axis=1), side.shape[1] - 1) * step
        halves.append(float(np.clip(np.median(run), *NECK_HALF_RANGE_E)) if side[:, 0].mean() > 0.5 else prior_half_e)
    tops = []
    for sign, half in zip((-1.0, 1.0), halves, strict=True):
        columns = (sign * us >= 0.35) & (sign * us <= min(half, 0.8))
        down_side = skin[:, columns]
        gap = ~down_side[1:] & ~down_side[:-1]
        ends = np.where(gap.any(axis=0), np.argmax(gap, axis=0), down_side.shape[0] - 1) * step
        tops.append(float(np.percentile(ends, 30)) if ends.size else NECK_BASE_E)
    return (halves[0], halves[1]), min(tops) - 0.05


def _drape_e(inside: np.ndarray, rows_e: np.ndarray, placement: AttirePlacement, drawing: AttireDrawing) -> np.ndarray:
    """Per profile column: how far (E, down positive) the drawing moves so its top meets the shoulder line: the
    person's outline (the matte's first row below the neck line), held between lines from the collar's top at the
    neck's sides sloping down at ``SHOULDER_SLOPE_DEG`` (an outline above the gentler line is hair or a raised
    shoulder: the clothes stop at that line; one below the steeper line is a sloping shoulder: the clothes sit on
    that line), out to near the shoulder's end; nothing over the neck, faded in beside it, smoothed."""
    below_line = rows_e >= placement.neck_line_e
    person = inside & below_line[:, None]
    person_top = np.where(person.any(axis=0), rows_e[np.argmax(person, axis=0)], np.inf)
    columns_e = (np.arange(inside.shape[1]) - inside.shape[1] // 2) / _PROFILE_PX_PER_E
    left = columns_e < 0
    neck = np.where(left, placement.neck_halves_e[0], placement.neck_halves_e[1])
    shoulder = np.where(left, placement.shoulder_halves_e[0], placement.shoulder_halves_e[1])
    out_e = np.maximum(np.abs(columns_e) - neck, 0.0)
    gentle = placement.collar_top_e + np.maximum(out_e - _COLLAR_ROLL_E, 0.0) * math.tan(
        math.radians(SHOULDER_SLOPE_DEG[0])
    )
    steep = placement.collar_top_e + out_e * math.tan(math.radians(SHOULDER_SLOPE_DEG[1]))
    target = np.clip(person_top, np.maximum(gentle, placement.neck_line_e), steep)
    x_px, _ = _drawing_xy(drawing, placement, columns_e.astype(np.float32), np.zeros(1, np.float32))
    opaque = drawing.rgba[..., 3] >= 128
    cols = np.clip(np.round(x_px).astype(int), 0, opaque.shape[1] - 1)
    has_top = opaque[:, cols].any(axis=0)
    drawn_top = (np.argmax(opaque[:, cols], axis=0) - drawing.collar_xy[1]) / drawing.eye_distance_px
    drawn_top = np.where(has_top, drawn_top + placement.drop_e, np.nan)
    shift = np.clip(target - drawn_top, *DRAPE_RANGE_E)
    weight = np.clip((out_e + 0.1) / 0.25, 0.0, 1.0)
    valid = np.isfinite(shift) & (np.abs(columns_e) <= shoulder - 0.3)
    if not valid.any():
        return np.zeros_like(columns_e)
    shift = np.interp(columns_e, columns_e[valid], shift[valid]) * weight
    return np.convolve(np.pad(shift, 3, mode="edge"), np.ones(7) / 7, mode="valid")


@dataclass(frozen=True, eq=False)
class AttireFit:
    """Where one person's clothes went, for the report's seam check: the face dressed, the placement and the
    clothes' coverage of the photo (HxW uint8, 255 where the template's own pixels, its clothes or the skin its
    opening paints, replace the person's)."""

    face: Face
    placement: AttirePlacement
    cover: np.ndarray


@dataclass(frozen=True, eq=False)
class Dressed:
    """The photo in new clothes (HxWx3 uint8 RGB), the matte of the person and the clothes together (the input
    matte's dtype), and where the clothes went."""

    rgb: np.ndarray
    alpha: np.ndarray
    fit: AttireFit


def dress(
    rgb: np.ndarray,
    alpha: np.ndarray,
    face: Face,
    template: AttireTemplate,
    colour: str | None = None,
    *,
    mesh: np.ndarray | None = None,
    parse: PortraitParse | None = None,
) -> Dressed:
    """``rgb`` (HxWx3 uint8 RGB) and its matte ``alpha`` (HxW, float32 in [0, 1] or uint8) with ``template`` in
    ``colour`` fitted to ``face`` (:func:`place_attire`) and laid over the person's clothes (:func:`wear_attire`)."""
    drawing = template.drawing(colour)
    placement = place_attire(alpha, face, drawing, mesh=mesh, rgb=rgb)
    return wear_attire(rgb, alpha, face, drawing, placement, parse=parse)


def wear_attire(
    rgb: np.ndarray,
    alpha: np.ndarray,
    face: Face,
    drawing: AttireDrawing,
    placement: AttirePlacement,
    *,
    parse: PortraitParse | None = None,
) -> Dressed:
    """``drawing`` composited at ``placement`` over the person's clothes; the new alpha is the union of the person
    and the clothes. Pixels at or above the neck line keep their values exactly, and so does the hair that
    ``parse`` finds in front of the clothes (long hair on the shoulders), up to a soft edge."""
    height, width = rgb.shape[:2]
    cover_u8 = np.zeros((height, width), np.uint8)
    box = _footprint_box(placement, drawing, (height, width))
    if box is None:
        return Dressed(rgb.copy(), alpha.copy(), AttireFit(face, placement, cover_u8))
    top, bottom, left, right = box
    ys, xs = np.mgrid[top:bottom, left:right].astype(np.float32)
    u_e, v_e = _face_frame_e(xs, ys, placement)
    clothes, skin = _warp_drawing(drawing, placement, u_e, v_e)
    shown = (v_e + placement.drop_e >= placement.neck_line_e).astype(np.float32)
    if parse is not None:
        shown *= 1.0 - _soft(parse.hair[top:bottom, left:right], HAIR_EDGE_E * placement.eye_distance_px)
    clothes_a = clothes[..., 3] * shown
    fade = np.clip((v_e + placement.drop_e - placement.neck_line_e) / _SKIN_FADE_E, 0.0, 1.0)
    skin_a = skin[..., 0] * shown * fade * (1.0 - clothes_a)
    skin_rgb = _skin_colour(rgb, alpha, box, u_e, v_e, placement, face)
    cover = clothes_a + skin_a
    changed = cover > 0.0
    person = rgb[top:bottom, left:right].astype(np.float32)
    paint = (
        clothes[..., :3] * shown[..., None]
        + skin_rgb * (skin[..., 1] * shown * fade * (1.0 - clothes_a))[..., None]
        + person * (1.0 - cover)[..., None]
    )
    out_rgb = rgb.copy()
    out_rgb[top:bottom, left:right] = np.where(changed[..., None], np.clip(paint + 0.5, 0, 255), person).astype(
        np.uint8
    )
    out_alpha = alpha.copy()
    region = alpha[top:bottom, left:right]
    if alpha.dtype == np.uint8:
        union = region.astype(np.float32) + cover * (255.0 - region)
        out_alpha[top:bottom, left:right] = np.where(changed, np.clip(union + 0.5, 0, 255), region).astype(np.uint8)
    else:
        union = region + cover * (1.0 - region)
        out_alpha[top:bottom, left:right] = np.where(changed, union, region).astype(alpha.dtype)
    cover_u8[top:bottom, left:right] = np.clip(cover * 255.0 + 0.5, 0, 255).astype(np.uint8)
    return Dressed(out_rgb, out_alpha, AttireFit(face, placement, cover_u8))


def _soft(mask: np.ndarray, sigma_px: float) -> np.ndarray:
    """A boolean mask as float32 coverage with a Gaussian edge (the parse's coarse grid smoothed away)."""
    return cv2.GaussianBlur(mask.astype(np.float32), (0, 0), max(0.5, sigma_px))


def _neck_half_e(face: Face, mesh: np.ndarray | None, right: np.ndarray, eye_px: float) -> float:
    """Half the neck's width (E): ``NECK_PER_FACE_WIDTH`` of the face's width across the mesh, else of the box's."""
    if mesh is not None:
        across = np.asarray(mesh, np.float64) @ right
        face_width_px = float(across.max() - across.min())
    else:
        face_width_px = float(face.box[2] - face.box[0])
    return float(np.clip(NECK_PER_FACE_WIDTH * face_width_px / (2 * eye_px), *NECK_HALF_RANGE_E))


def _profile(alpha: np.ndarray, chin: np.ndarray, right: np.ndarray, down: np.ndarray, eye_px: float) -> np.ndarray:
    """Where the person is (alpha >= 0.5) in the face frame from the chin down 4 E and 6 E to each side,
    ``_PROFILE_PX_PER_E`` per E; outside the photo counts as the person (a body the photo cuts reaches its edge)."""
    step = eye_px / _PROFILE_PX_PER_E
    origin = chin - _PROFILE_HALF_COLS * step * right
    grid_to_photo = np.array(
        [[step * right[0], step * down[0], origin[0]], [step * right[1], step * down[1], origin[1]]], np.float64
    )
    scale = 255.0 if alpha.dtype == np.uint8 else 1.0
    profile = cv2.warpAffine(
        alpha.astype(np.float32),
        grid_to_photo,
        (2 * _PROFILE_HALF_COLS + 1, 4 * _PROFILE_PX_PER_E + 1),
        flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
        borderMode=cv2.BORDER_REPLICATE,
    )
    return profile >= 0.5 * scale


def _run_length(inside: np.ndarray) -> np.ndarray:
    """Per row: how many leading pixels are inside."""
    full = inside.all(axis=1)
    return np.where(full, inside.shape[1], np.argmin(inside, axis=1)).astype(np.float64)


def _face_frame_e(xs: np.ndarray, ys: np.ndarray, placement: AttirePlacement) -> tuple[np.ndarray, np.ndarray]:
    """Photo pixels to the template's frame (E): right of the collar's centre, and below it."""
    dx = xs - np.float32(placement.collar_xy[0])
    dy = ys - np.float32(placement.collar_xy[1])
    inv = np.float32(1.0 / placement.eye_distance_px)
    u_e = (dx * np.float32(placement.right[0]) + dy * np.float32(placement.right[1])) * inv
    v_e = (dx * np.float32(placement.down[0]) + dy * np.float32(placement.down[1])) * inv
    return u_e, v_e


def _footprint_box(
    placement: AttirePlacement, drawing: AttireDrawing, shape_hw: tuple[int, int]
) -> tuple[int, int, int, int] | None:
    """Rows and columns (top, bottom, left, right) that the clothes may reach: below the neck line, as wide as the
    fitted drawing, down to the photo's edge (the drawing's last row continues the clothes)."""
    height, width = shape_hw
    eye = placement.eye_distance_px
    reach_e = (
        placement.shoulder_half_e
        + (drawing.rgba.shape[1] - drawing.collar_xy[0]) / drawing.eye_distance_px
        - drawing.shoulder_width_px / (2 * drawing.eye_distance_px)
    )
    far_e = (height + width) / eye
    collar = np.asarray(placement.collar_xy)
    right, down = np.asarray(placement.right), np.asarray(placement.down)
    top_e = placement.neck_line_e - placement.drop_e
    corners = np.array(
        [collar + eye * (side * reach_e * right + depth * down) for side in (-1, 1) for depth in (top_e, far_e)]
    )
    left_px, top_px = np.floor(corners.min(axis=0)).astype(int)
    right_px, bottom_px = np.ceil(corners.max(axis=0)).astype(int) + 1
    top_px, left_px = max(0, top_px), max(0, left_px)
    bottom_px, right_px = min(height, bottom_px), min(width, right_px)
    if top_px >= bottom_px or left_px >= right_px:
        return None
    return top_px, bottom_px, left_px, right_px


def _warp_drawing(
    drawing: AttireDrawing, placement: AttirePlacement, u_e: np.ndarray, v_e: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The drawing sampled at the photo's pixels (float32: premultiplied RGBA in 0..255 RGB, 0..1 alpha; skin
    coverage and shade in 0..1), its neck and shoulders stretched sideways to the person's (piecewise linear)."""
    rgba, skin, eye_px = drawing.rgba, drawing.skin, drawing.eye_distance_px
    collar_x, collar_y = drawing.collar_xy
    shrink = placement.eye_distance_px / eye_px
    if shrink < 0.8:  # area-shrink first: a bilinear lookup of a much finer drawing aliases
        size_wh = (max(1, round(rgba.shape[1] * shrink)), max(1, round(rgba.shape[0] * shrink)))
        factor = (size_wh[0] / rgba.shape[1], size_wh[1] / rgba.shape[0])
        rgba = cv2.resize(rgba, size_wh, interpolation=cv2.INTER_AREA)
        skin = cv2.resize(skin, size_wh, interpolation=cv2.INTER_AREA)
        collar_x = (collar_x + 0.5) * factor[0] - 0.5
        collar_y = (collar_y + 0.5) * factor[1] - 0.5
        eye_px *= factor[0]
    map_x, map_y = _drawing_xy(drawing, placement, u_e, v_e)
    scale = eye_px / drawing.eye_distance_px
    map_x = (map_x - drawing.collar_xy[0]) * scale + collar_x
    map_y = (map_y - drawing.collar_xy[1]) * scale + collar_y
    clothes = cv2.remap(rgba, map_x, map_y, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE).astype(np.float32)
    clothes[..., 3] *= 1.0 / 255.0
    warped_skin = cv2.remap(skin, map_x, map_y, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    return clothes, warped_skin.astype(np.float32) * (1.0 / 255.0)


def _drawing_xy(
    drawing: AttireDrawing, placement: AttirePlacement, u_e: np.ndarray, v_e: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Drawing pixels for points of the face frame (E from the collar's centre): the neck and the shoulders stretched
    sideways to the person's (piecewise linear), each column draped onto the shoulders."""
    neck_e = drawing.neck_width_px / (2 * drawing.eye_distance_px)
    shoulder_e = drawing.shoulder_width_px / (2 * drawing.eye_distance_px)
    x_e = np.empty(np.shape(u_e), np.float32)
    left = u_e < 0
    for side, where in ((0, left), (1, ~left)):
        neck = placement.neck_halves_e[side]
        fitted = [0.0, neck, max(placement.shoulder_halves_e[side], neck + 0.5), 100.0]
        drawn = [0.0, neck_e, shoulder_e, 100.0 + shoulder_e - fitted[2]]
        x_e[where] = np.interp(np.abs(u_e[where]), fitted, drawn)
    x_e = np.copysign(x_e, u_e)
    columns_e = (np.arange(placement.drape_e.size) - placement.drape_e.size // 2) / _PROFILE_PX_PER_E
    lift_e = np.interp(u_e, columns_e, placement.drape_e).astype(np.float32)
    eye_px = np.float32(drawing.eye_distance_px)
    return drawing.collar_xy[0] + x_e * eye_px, drawing.collar_xy[1] + (v_e - lift_e) * eye_px


def _skin_colour(
    rgb: np.ndarray,
    alpha: np.ndarray,
    box: tuple[int, int, int, int],
    u_e: np.ndarray,
    v_e: np.ndarray,
    placement: AttirePlacement,
    face: Face,
) -> np.ndarray:
    """The person's own skin for an open neckline (float32, one RGB per pixel of ``box``): the neck just above the
    collar, averaged down each column of the face frame (smoothed across columns: no streaks) and continued
    downwards, lightening towards the lit skin between the mouth and the chin (the chest is out of the chin's
    shadow); where hair or a scarf hides the neck, that lit skin alone."""
    top, bottom, left, right = box
    pixels = rgb[top:bottom, left:right]
    solid = alpha[top:bottom, left:right] >= (0.9 * 255 if alpha.dtype == np.uint8 else 0.9)
    bins = np.floor(u_e / _SKIN_BIN_E).astype(np.int64)
    half_bins = int(np.ceil(placement.neck_half_e / _SKIN_BIN_E))
    neck = solid & (np.abs(bins) < half_bins) & (v_e + placement.drop_e >= placement.neck_line_e) & (v_e < -0.03)
    patch = chin_patch(rgb, face)
    if patch.size and neck.any():
        neck[neck] = skin_like(ycrcb(pixels[neck]), skin_reference(patch))
    lit = np.median(patch.reshape(-1, 3), axis=0) if patch.size else np.full(3, 200.0)
    if np.count_nonzero(neck) < 8:
        return np.broadcast_to(lit.astype(np.float32), pixels.shape)
    index = bins[neck] + half_bins
    across = np.array([1.0, 2.0, 3.0, 2.0, 1.0])  # each column's mean shares its neighbours': no vertical streaks
    counts = np.convolve(np.bincount(index, minlength=2 * half_bins).astype(np.float64), across, mode="same")
    found = np.flatnonzero(counts > 0)
    centres = (found - half_bins + 0.5) * _SKIN_BIN_E
    down = np.clip((v_e + placement.drop_e - placement.neck_line_e) / _SKIN_LIGHTEN_E, 0.0, 1.0)[..., None]
    columns = np.empty(u_e.shape + (3,), np.float32)
    for channel in range(3):
        sums = np.bincount(index, pixels[..., channel][neck].astype(np.float64), minlength=2 * half_bins)
        means = np.convolve(sums, across, mode="same")[found] / counts[found]
        columns[..., channel] = np.interp(u_e, centres, means)
    return columns + (lit.astype(np.float32) - columns) * (_SKIN_LIGHTEN_MAX * down)


# ---------------------------------------------------------------------------------------------------------------
# Drawing the built-ins: polygons in eye distances (E) around the collar's centre, x to the image right, y down


def _curve(*points: tuple[float, float], steps: int = 24) -> np.ndarray:
    """A Bézier curve (3 or 4 control points) as a polyline (E)."""
    ctrl = np.asarray(points, np.float64)
    t = np.linspace(0.0, 1.0, steps)[:, None]
    if len(ctrl) == 3:
        return (1 - t) ** 2 * ctrl[0] + 2 * (1 - t) * t * ctrl[1] + t**2 * ctrl[2]
    return (1 - t) ** 3 * ctrl[0] + 3 * (1 - t) ** 2 * t * ctrl[1] + 3 * (1 - t) * t**2 * ctrl[2] + t**3 * ctrl[3]


def _path(*parts) -> np.ndarray:
    """Points and curves joined into one outline."""
    return np.vstack([np.atleast_2d(np.asarray(part, np.float64)) for part in parts])


def _mirror(points: np.ndarray) -> np.ndarray:
    """The other side's outline (x negated), in reverse order so both halves join into one loop."""
    return (points * np.array([-1.0, 1.0]))[::-1]


def _both(half: np.ndarray) -> np.ndarray:
    """A symmetric shape from its image-right half (drawn from the top centre down and back)."""
    return _path(_mirror(half), half)


class _Sketch:
    """A canvas ``SUPERSAMPLE`` times finer than the reference scale; shapes are painted as premultiplied RGB over
    what is there (masks are anti-aliased coverage in 0..1)."""

    def __init__(self) -> None:
        self.px_per_e = REFERENCE_EYE_PX * SUPERSAMPLE
        width = round(2 * _CANVAS_X_E * REFERENCE_EYE_PX) * SUPERSAMPLE
        height = round((_CANVAS_Y_E[1] - _CANVAS_Y_E[0]) * REFERENCE_EYE_PX) * SUPERSAMPLE
        self.rgb = np.zeros((height, width, 3), np.float32)
        self.alpha = np.zeros((height, width), np.float32)
        self.skin = np.zeros((height, width), np.float32)
        self.skin_shade = np.zeros((height, width), np.float32)
        self.x = ((np.arange(width, dtype=np.float32) + 0.5) / self.px_per_e - _CANVAS_X_E)[None, :]
        self.y = ((np.arange(height, dtype=np.float32) + 0.5) / self.px_per_e + _CANVAS_Y_E[0])[:, None]

    def mask(self, *outlines: np.ndarray) -> np.ndarray:
        """The union of closed outlines (E) as an anti-aliased mask."""
        canvas = np.zeros(self.alpha.shape, np.uint8)
        shift = 4
        origin = np.array([_CANVAS_X_E, -_CANVAS_Y_E[0]])
        polys = [
            np.round((o + origin) * self.px_per_e * (1 << shift) - 0.5 * (1 << shift)).astype(np.int32)
            for o in outlines
        ]
        cv2.fillPoly(canvas, polys, 255, lineType=cv2.LINE_AA, shift=shift)
        return canvas.astype(np.float32) * np.float32(1.0 / 255.0)

    def line(self, points: np.ndarray, width_e: float) -> np.ndarray:
        """A stroke along ``points`` (E) as an anti-aliased mask."""
        canvas = np.zeros(self.alpha.shape, np.uint8)
        origin = np.array([_CANVAS_X_E, -_CANVAS_Y_E[0]])
        pts = np.round((points + origin) * self.px_per_e - 0.5).astype(np.int32)
        cv2.polylines(canvas, [pts], False, 255, thickness=max(1, round(width_e * self.px_per_e)), lineType=cv2.LINE_AA)
        return canvas.astype(np.float32) * np.float32(1.0 / 255.0)

    def soft(self, mask: np.ndarray, sigma_e: float) -> np.ndarray:
        """``mask`` blurred (a shadow's falloff); blurred on a 4x coarser grid, where it costs little."""
        small = cv2.resize(mask, (mask.shape[1] // 4, mask.shape[0] // 4), interpolation=cv2.INTER_AREA)
        small = cv2.GaussianBlur(small, (0, 0), max(0.5, sigma_e * self.px_per_e / 4))
        return cv2.resize(small, (mask.shape[1], mask.shape[0]), interpolation=cv2.INTER_LINEAR)

    def paint(self, mask: np.ndarray, colour: RGB, shade: np.ndarray | float = 1.0) -> None:
        """``colour`` times ``shade`` over the canvas where ``mask`` is."""
        colour_px = np.asarray(colour, np.float32) * np.asarray(shade, np.float32)[..., None]
        m = mask[..., None]
        self.rgb *= 1.0 - m
        self.rgb += colour_px * m
        self.alpha *= 1.0 - mask
        self.alpha += mask

    def shadow(self, mask: np.ndarray, amount: float) -> None:
        """Darken what is painted by ``amount`` where the soft ``mask`` is."""
        self.rgb *= (1.0 - amount * mask)[..., None]

    def light(self, mask: np.ndarray, amount: float) -> None:
        """Brighten what is painted towards white by ``amount`` where the soft ``mask`` is (a sheen)."""
        self.rgb += ((255.0 - self.rgb) * amount * mask[..., None]) * self.alpha[..., None]

    def show_skin(self, outline: np.ndarray, depth_e: float) -> None:
        """Mark where the person's own skin shows inside ``outline`` (under every layer painted afterwards): it
        fades in below the collar's top (the person's neck above it stays) and darkens down to ``depth_e``."""
        cover = self.mask(outline) * np.clip((self.y + 0.05) / 0.3, 0.0, 1.0)
        shade = 1.0 - 0.15 * np.clip(self.y / depth_e, 0.0, 1.0)
        self.skin = np.maximum(self.skin, cover)
        self.skin_shade = np.maximum(self.skin_shade, cover * shade)

    def finish(self) -> AttireDrawing:
        """Area-shrink to the reference scale (the anti-aliasing) and store as uint8."""
        size_wh = (self.alpha.shape[1] // SUPERSAMPLE, self.alpha.shape[0] // SUPERSAMPLE)
        hidden = 1.0 - self.alpha
        layers = np.dstack([self.rgb, self.alpha * 255.0, self.skin * hidden * 255.0, self.skin_shade * hidden * 255.0])
        small = cv2.resize(layers, size_wh, interpolation=cv2.INTER_AREA)
        stored = np.clip(small + 0.5, 0, 255).astype(np.uint8)
        return AttireDrawing(
            rgba=np.ascontiguousarray(stored[..., :4]),
            skin=np.ascontiguousarray(stored[..., 4:]),
            collar_xy=(_CANVAS_X_E * REFERENCE_EYE_PX - 0.5, -_CANVAS_Y_E[0] * REFERENCE_EYE_PX - 0.5),
            neck_width_px=2 * _NECK_HALF_E * REFERENCE_EYE_PX,
            shoulder_width_px=2 * _SHOULDER_HALF_E * REFERENCE_EYE_PX,
            eye_distance_px=float(REFERENCE_EYE_PX),
        )


N = _NECK_HALF_E
S = _SHOULDER_HALF_E
BOTTOM = _CANVAS_Y_E[1] + 0.5  # outlines run past the canvas: its last row continues the clothes downwards
WHITE: RGB = (246, 246, 244)
LIGHT_BLUE: RGB = (196, 216, 238)
TIE_RED: RGB = (128, 30, 44)
SCHOOL_STRIPE: RGB = (196, 160, 60)
TIE_BAND_E = 0.1  # a buttoned collar's band shows down to here between the wings; the knot starts there


def _body(neck_e: float, shoulder_e: float, slope_e: float, neck_top_e: float = 0.0) -> np.ndarray:
    """A torso's outline from the neck's sides (``neck_top_e`` below the collar's centre: a jacket's collar rises
    behind the neck) over the shoulders and down the arms (``slope_e``: how far the shoulder's end is below the
    neck)."""
    half = _path(
        (0.0, neck_top_e),
        _curve(
            (neck_e, neck_top_e), (neck_e + 0.7, 0.12), (shoulder_e - 0.9, slope_e - 0.4), (shoulder_e - 0.15, slope_e)
        ),
        _curve(
            (shoulder_e - 0.15, slope_e),
            (shoulder_e + 0.15, slope_e + 0.1),
            (shoulder_e + 0.3, slope_e + 0.5),
            (shoulder_e + 0.3, slope_e + 1.0),
        ),
        (shoulder_e + 0.35, BOTTOM),
    )
    return _both(half)


def _neck_hole(depth_e: float, width_e: float = N) -> np.ndarray:
    """The neck's opening of a shirt: a U from the neck's sides down to ``depth_e`` at the centre."""
    half = _path(
        (0.0, -1.0),
        (width_e + 0.3, -1.0),
        (width_e, -0.3),
        _curve((width_e, -0.12), (width_e - 0.05, depth_e * 0.8), (0.3, depth_e), (0.0, depth_e)),
    )
    return _both(half)


def _cloth_shade(sketch: _Sketch, width_e: float, *, sheen: float = 0.12) -> np.ndarray:
    """Light from the front and above: brighter at the top, falling off round the body's sides (a cylinder)."""
    across = 1.0 - 0.35 * np.clip(np.abs(sketch.x) / width_e, 0.0, 1.2) ** 2
    downwards = 1.0 - 0.10 * np.clip(sketch.y / 4.0, 0.0, 1.0)
    top = sheen * np.exp(-(((sketch.y - 0.35) / 0.5) ** 2)) * (np.abs(sketch.x) > N)
    return (across * downwards + top).astype(np.float32)


def _draw_shirt(sketch: _Sketch, colour: RGB, *, neck_depth_e: float, shoulders: bool) -> None:
    """The shirt's front (under a jacket: only what its opening shows) and, alone, the whole shirt."""
    outline = _body(N - 0.02, S - 0.15, 0.6) if shoulders else _body(N - 0.02, 1.6, 0.4)
    body = sketch.mask(outline) * (1.0 - sketch.mask(_neck_hole(neck_depth_e)))
    sketch.paint(body, colour, _cloth_shade(sketch, S if shoulders else 2.0, sheen=0.0) ** 0.6)
    if shoulders:
        # Folds: soft creases from the armpits towards the chest, a yoke seam over the shoulders.
        for side in (-1.0, 1.0):
            crease = _curve((side * (S - 0.4), 1.7), (side * (S - 1.0), 2.1), (side * (S - 1.6), 2.7))
            sketch.shadow(sketch.soft(sketch.line(crease, 0.06), 0.12) * body, 0.35)
            seam = _curve((side * (N + 0.3), 0.18), (side * (S - 1.0), 0.55), (side * (S - 0.2), 0.95))
            sketch.shadow(sketch.soft(sketch.line(seam, 0.015), 0.02) * body, 0.25)


def _shade_band(sketch: _Sketch) -> None:
    """The buttoned collar's band between the wings (drawn over it next) in their shadow, so the wings read."""
    band = sketch.soft(sketch.mask(_neck_hole(0.5, N - 0.1)), 0.06) * sketch.alpha
    sketch.shadow(band * np.clip(1.0 - (sketch.y - TIE_BAND_E) / 0.5, 0.0, 1.0), 0.12)


def _draw_placket(sketch: _Sketch, from_e: float, to_e: float) -> None:
    """The button strip down a shirt's centre: two seams and buttons."""
    for x in (-0.13, 0.13):
        sketch.shadow(sketch.soft(sketch.line(np.array([[x, from_e], [x, to_e]]), 0.012), 0.015), 0.18)
    for y in np.arange(from_e + 0.35, to_e, 0.85):
        button = sketch.mask(_circle(0.0, y, 0.06))
        sketch.shadow(sketch.soft(button, 0.03), 0.15)
        sketch.paint(button, (236, 234, 228), 1.0 - 0.12 * np.clip((sketch.y - y + 0.06) / 0.12, 0.0, 1.0))


def _circle(cx: float, cy: float, r: float) -> np.ndarray:
    angles = np.linspace(0.0, 2 * math.pi, 40, endpoint=False)
    return np.stack([cx + r * np.cos(angles), cy + r * np.sin(angles)], axis=1)


def _draw_collar(sketch: _Sketch, colour: RGB, *, spread_e: float, point_e: float, meet_e: float) -> None:
    """A shirt collar's two wings from the neck's sides to their points (``spread_e`` out, ``point_e`` down), meeting
    at ``meet_e`` below the centre; a shadow under each."""
    half = _path(
        _curve((N - 0.02, -0.12), (N + 0.08, 0.15), (spread_e + 0.1, point_e - 0.4), (spread_e, point_e)),
        _curve((spread_e, point_e), (spread_e * 0.6, point_e - 0.15), (0.1, meet_e + 0.1), (0.03, meet_e)),
        _curve((0.03, meet_e), (0.3, meet_e - 0.02), (N - 0.1, 0.3), (N - 0.1, -0.05)),
    )
    wings = sketch.mask(half, _mirror(half))
    sketch.shadow(sketch.soft(np.roll(wings, round(0.06 * sketch.px_per_e), axis=0), 0.05) * (1 - wings), 0.35)
    shade = 1.0 - 0.12 * np.clip((sketch.y - meet_e) / max(point_e - meet_e, 0.1), 0.0, 1.0)
    sketch.paint(wings, colour, shade)
    for mirror in (1.0, -1.0):
        fold = _curve(
            (mirror * (N - 0.02), -0.12), (mirror * (N + 0.06), 0.12), (mirror * (spread_e * 0.9), point_e - 0.3)
        )
        sketch.shadow(sketch.soft(sketch.line(fold, 0.02), 0.03) * wings, 0.12)


def _draw_tie(sketch: _Sketch, colour: RGB, *, stripes: RGB | None = None, knot_top_e: float = 0.3) -> None:
    """A four-in-hand: a knot under the collar, the blade widening downwards, a dimple's shadow under the knot."""
    blade_half = _path((0.1, knot_top_e + 0.4), (0.3, 2.6), (0.32, BOTTOM))
    blade = sketch.mask(_both(blade_half))
    knot_half = _path(
        (0.0, knot_top_e - 0.05), (0.2, knot_top_e - 0.05), (0.13, knot_top_e + 0.45), (0.0, knot_top_e + 0.48)
    )
    knot = sketch.mask(_both(knot_half))
    width = np.maximum(0.1 + 0.2 * np.clip((sketch.y - knot_top_e) / 2.2, 0.0, 1.0), 0.1)
    rounded = 1.0 - 0.35 * np.clip(np.abs(sketch.x) / width, 0.0, 1.0) ** 2
    sketch.shadow(sketch.soft(np.roll(blade, round(0.04 * sketch.px_per_e), axis=1), 0.06) * (1 - blade), 0.3)
    sketch.paint(blade, colour, rounded)
    if stripes is not None:
        band = ((sketch.x + sketch.y) % 0.32 < 0.07).astype(np.float32)
        sketch.paint(blade * band, stripes, rounded)
    sketch.shadow(sketch.soft(knot, 0.05) * blade, 0.45)
    sketch.paint(knot, colour, 1.1 - 0.3 * np.clip((sketch.y - knot_top_e) / 0.5, 0.0, 1.0))
    if stripes is not None:
        band = ((sketch.x + sketch.y) % 0.32 < 0.07).astype(np.float32)
        sketch.paint(knot * band, stripes, 1.0 - 0.25 * np.clip((sketch.y - knot_top_e) / 0.5, 0.0, 1.0))
    dimple = _curve((-0.02, knot_top_e + 0.5), (0.0, knot_top_e + 0.62), (0.02, knot_top_e + 0.8))
    sketch.shadow(sketch.soft(sketch.line(dimple, 0.03), 0.03) * blade, 0.35)


def _draw_jacket(
    sketch: _Sketch, colour: RGB, *, v_depth_e: float, gorge_e: float, lapel_e: float, notch: bool
) -> None:
    """A jacket: the body (its front opening a V down to ``v_depth_e``), the sleeves' seams, and lapels rolling
    from the collar (their widest ``lapel_e`` out at ``gorge_e`` down), with the shadows they cast."""
    opening_half = _path(
        (0.0, -1.0), (N + 0.25, -1.0), _curve((N + 0.1, 0.0), (N - 0.05, 0.9), (0.4, v_depth_e - 0.6), (0.0, v_depth_e))
    )
    opening = sketch.mask(_both(opening_half))
    body = sketch.mask(_body(N + 0.08, S, 0.6, neck_top_e=-0.1)) * (1.0 - opening)
    shade = _cloth_shade(sketch, S + 0.3)
    sketch.paint(body, colour, shade)
    for side in (-1.0, 1.0):
        seam = _curve(
            (side * (S - 0.2), 0.6), (side * (S - 0.45), 1.3), (side * (S - 0.4), 2.4), (side * (S - 0.3), BOTTOM)
        )
        sketch.shadow(sketch.soft(sketch.line(seam, 0.02), 0.04) * body, 0.3)
        sketch.light(sketch.soft(sketch.line(seam + [side * 0.06, 0], 0.04), 0.05) * body, 0.04)
        fold = _curve((side * (S - 0.6), 1.6), (side * (S - 1.1), 2.2), (side * (S - 1.3), 3.2))
        sketch.shadow(sketch.soft(sketch.line(fold, 0.08), 0.15) * body, 0.25)
    edge_half = _curve((N + 0.1, 0.0), (N - 0.05, 0.9), (0.4, v_depth_e - 0.6), (0.0, v_depth_e))
    tip = (N + lapel_e, gorge_e)
    if notch:
        outer = [
            tip,
            (N + lapel_e - 0.32, gorge_e - 0.08),
            (N + lapel_e - 0.18, gorge_e - 0.3),
            (N + 0.42, 0.05),
            (N + 0.12, -0.02),
        ]
    else:
        outer = [_curve(tip, (N + lapel_e - 0.05, gorge_e - 0.5), (N + 0.35, 0.1), (N + 0.12, -0.02))]
    lapel_half = _path(
        edge_half[::-1],
        _curve((0.0, v_depth_e), (0.2, v_depth_e - 0.3), (N + lapel_e - 0.25, gorge_e + 0.6), tip),
        *outer,
    )
    lapels = sketch.mask(lapel_half, _mirror(lapel_half))
    drop = sketch.soft(np.roll(np.roll(lapels, round(0.05 * sketch.px_per_e), axis=0), 0, axis=1), 0.05)
    sketch.shadow(drop * (1.0 - lapels) * sketch.alpha, 0.45)
    roll_x = np.abs(sketch.x)
    rolled = 1.0 + 0.12 * np.exp(-(((roll_x - (N + 0.15) + 0.12 * sketch.y) / 0.25) ** 2))
    sketch.paint(lapels, colour, shade * rolled * 1.03)
    for side in (-1.0, 1.0):
        edge = lapel_half[len(edge_half) :] * [side, 1.0]
        sketch.shadow(sketch.soft(sketch.line(edge, 0.02), 0.02) * lapels, 0.35)
        sketch.shadow(sketch.soft(sketch.line(edge_half * [side, 1.0], 0.03), 0.03) * lapels, 0.2)
    button = sketch.mask(_circle(0.0, v_depth_e + 0.25, 0.09))
    sketch.shadow(sketch.soft(button, 0.04) * body, 0.4)
    sketch.paint(button, colour, 0.6)


def _draw_jumper(sketch: _Sketch, colour: RGB, *, v_depth_e: float, stripe: RGB) -> None:
    """A knitted V-neck jumper: the body, a ribbed V band with a stripe, soft folds."""
    opening_half = _path(
        (0.0, -1.0), (N + 0.2, -1.0), _curve((N + 0.05, 0.0), (N - 0.1, 0.8), (0.3, v_depth_e - 0.5), (0.0, v_depth_e))
    )
    opening = sketch.mask(_both(opening_half))
    body = sketch.mask(_body(N + 0.05, S - 0.1, 0.65)) * (1.0 - opening)
    knit = 1.0 + 0.03 * np.sin(sketch.x * 2 * math.pi / 0.09)
    sketch.paint(body, colour, _cloth_shade(sketch, S, sheen=0.05) * knit)
    band_half = _path(
        (0.0, -1.0),
        (N + 0.42, -1.0),
        _curve((N + 0.32, 0.0), (N + 0.2, 0.9), (0.45, v_depth_e - 0.3), (0.0, v_depth_e + 0.32)),
    )
    band = sketch.mask(_both(band_half)) * (1.0 - opening) * body
    rib = 1.0 + 0.08 * np.sin((sketch.x * 0.7 + sketch.y) * 2 * math.pi / 0.07)
    sketch.paint(band, colour, _cloth_shade(sketch, S, sheen=0.0) * rib * 0.92)
    stripe_half = _path(
        (0.0, -1.0),
        (N + 0.22, -1.0),
        _curve((N + 0.2, 0.0), (N + 0.08, 0.85), (0.38, v_depth_e - 0.4), (0.0, v_depth_e + 0.17)),
    )
    inner = sketch.mask(_both(stripe_half)) * (
        1.0
        - sketch.mask(
            _both(
                _path(
                    (0.0, -1.0),
                    (N + 0.16, -1.0),
                    _curve((N + 0.14, 0.0), (N + 0.02, 0.85), (0.34, v_depth_e - 0.42), (0.0, v_depth_e + 0.1)),
                )
            )
        )
    )
    sketch.paint(inner * band, stripe, 0.95)
    for side in (-1.0, 1.0):
        fold = _curve((side * (S - 0.6), 1.6), (side * (S - 1.1), 2.2), (side * (S - 1.3), 3.2))
        sketch.shadow(sketch.soft(sketch.line(fold, 0.1), 0.18) * body, 0.22)


def _draw_blouse(sketch: _Sketch, colour: RGB) -> None:
    """A blouse: softer, narrower shoulders, a V neckline showing the skin, a flat rounded collar lying open."""
    v_depth = 1.15
    hole = _both(
        _path(
            (0.0, -1.0),
            (N + 0.2, -1.0),
            _curve((N - 0.05, -0.1), (N - 0.15, 0.45), (0.3, v_depth - 0.3), (0.0, v_depth)),
        )
    )
    sketch.show_skin(hole, v_depth)
    body = sketch.mask(_body(N - 0.05, S - 0.3, 0.7)) * (1.0 - sketch.mask(hole))
    sketch.paint(body, colour, _cloth_shade(sketch, S - 0.2, sheen=0.0) ** 0.6)
    for side in (-1.0, 1.0):
        drape = _curve((side * 0.35, v_depth + 0.1), (side * 0.9, 1.9), (side * 1.1, 3.2))
        sketch.shadow(sketch.soft(sketch.line(drape, 0.08), 0.2) * body, 0.18)
        crease = _curve((side * (S - 0.7), 1.8), (side * (S - 1.1), 2.3), (side * (S - 1.5), 2.9))
        sketch.shadow(sketch.soft(sketch.line(crease, 0.06), 0.14) * body, 0.25)
    collar_half = _path(
        _curve((N - 0.08, -0.12), (N + 0.15, 0.05), (N + 0.55, 0.5), (N + 0.35, 0.95)),
        _curve((N + 0.35, 0.95), (0.55, 1.2), (0.12, v_depth + 0.05), (0.0, v_depth + 0.08)),
        _curve((0.0, v_depth), (0.3, v_depth - 0.3), (N - 0.15, 0.45), (N - 0.05, -0.1)),
    )
    collar = sketch.mask(collar_half, _mirror(collar_half))
    sketch.shadow(sketch.soft(np.roll(collar, round(0.05 * sketch.px_per_e), axis=0), 0.05) * (1 - collar), 0.3)
    sketch.paint(collar, colour, 1.0 - 0.08 * np.clip(sketch.y / 1.2, 0.0, 1.0))
    for side in (-1.0, 1.0):
        edge = collar_half[: len(collar_half) * 2 // 3] * [side, 1.0]
        sketch.shadow(sketch.soft(sketch.line(edge, 0.015), 0.02) * collar, 0.12)


def _suit(colour: RGB, *, tie: bool) -> AttireDrawing:
    sketch = _Sketch()
    if tie:
        _draw_shirt(sketch, WHITE, neck_depth_e=TIE_BAND_E, shoulders=False)
        _shade_band(sketch)
        _draw_tie(sketch, TIE_RED, knot_top_e=TIE_BAND_E)
        _draw_collar(sketch, WHITE, spread_e=0.62, point_e=0.95, meet_e=0.36)
    else:
        sketch.show_skin(_neck_hole(1.0), 1.0)
        _draw_shirt(sketch, WHITE, neck_depth_e=1.0, shoulders=False)
        _draw_open_collar(sketch, WHITE)
    _draw_jacket(sketch, colour, v_depth_e=2.9, gorge_e=1.05, lapel_e=0.8, notch=True)
    return sketch.finish()


def _draw_open_collar(sketch: _Sketch, colour: RGB) -> None:
    """An open shirt collar: the wings spread over the jacket's lapels, the top button undone."""
    half = _path(
        _curve((N - 0.05, -0.12), (N + 0.15, 0.1), (N + 0.5, 0.6), (N + 0.45, 1.05)),
        _curve((N + 0.45, 1.05), (0.6, 1.0), (0.2, 1.0), (0.04, 1.05)),
        _curve((0.04, 1.05), (0.25, 0.8), (N - 0.2, 0.3), (N - 0.12, -0.05)),
    )
    wings = sketch.mask(half, _mirror(half))
    sketch.shadow(sketch.soft(np.roll(wings, round(0.05 * sketch.px_per_e), axis=0), 0.05) * (1 - wings), 0.3)
    sketch.paint(wings, colour, 1.0 - 0.1 * np.clip(sketch.y, 0.0, 1.0))


def _women_suit(colour: RGB) -> AttireDrawing:
    sketch = _Sketch()
    sketch.show_skin(_neck_hole(0.98), 0.98)
    _draw_shirt(sketch, WHITE, neck_depth_e=0.98, shoulders=False)
    _draw_jacket(sketch, colour, v_depth_e=3.1, gorge_e=1.25, lapel_e=0.65, notch=False)
    return sketch.finish()


def _white_shirt(colour: RGB) -> AttireDrawing:
    sketch = _Sketch()
    _draw_shirt(sketch, colour, neck_depth_e=TIE_BAND_E, shoulders=True)
    _shade_band(sketch)
    _draw_placket(sketch, 0.4, BOTTOM)
    _draw_collar(sketch, colour, spread_e=0.66, point_e=0.95, meet_e=0.36)
    return sketch.finish()


def _blouse(colour: RGB) -> AttireDrawing:
    sketch = _Sketch()
    _draw_blouse(sketch, colour)
    return sketch.finish()


def _school_uniform(colour: RGB) -> AttireDrawing:
    sketch = _Sketch()
    _draw_shirt(sketch, WHITE, neck_depth_e=TIE_BAND_E, shoulders=False)
    _shade_band(sketch)
    _draw_tie(sketch, colour, stripes=SCHOOL_STRIPE, knot_top_e=TIE_BAND_E)
    _draw_collar(sketch, WHITE, spread_e=0.58, point_e=0.88, meet_e=0.36)
    _draw_jumper(sketch, colour, v_depth_e=2.3, stripe=SCHOOL_STRIPE)
    return sketch.finish()


SUIT_COLOURS: dict[str, RGB] = {
    "navy": (31, 41, 68),
    "black": (28, 28, 31),
    "charcoal": (56, 59, 64),
    "grey": (112, 115, 120),
}
SHIRT_COLOURS: dict[str, RGB] = {"white": WHITE, "light-blue": LIGHT_BLUE}
SCHOOL_COLOURS: dict[str, RGB] = {"navy": (34, 45, 82), "maroon": (98, 28, 40), "green": (30, 72, 52)}


@functools.cache
def _drawn(name: str, colour: RGB | None) -> AttireDrawing:
    """A built-in in one colour, drawn once per process (60 to 160 ms each on one core)."""
    draw = {
        "suit-tie": functools.partial(_suit, tie=True),
        "suit": functools.partial(_suit, tie=False),
        "women-suit": _women_suit,
        "white-shirt": _white_shirt,
        "blouse": _blouse,
        "school-uniform": _school_uniform,
    }[name]
    return draw(colour)


def _builtin(name: str, title_zh: str, title_en: str, colours: Mapping[str, RGB]) -> AttireTemplate:
    return AttireTemplate(name, title_zh, title_en, colours, functools.partial(_drawn, name))


BUILTIN_TEMPLATES: Mapping[str, AttireTemplate] = {
    t.name: t
    for t in (
        _builtin("suit-tie", "西装领带", "Suit and tie", SUIT_COLOURS),
        _builtin("suit", "西装（无领带）", "Suit, open collar", SUIT_COLOURS),
        _builtin("women-suit", "女士西装", "Women's suit", SUIT_COLOURS),
        _builtin("white-shirt", "衬衫", "Shirt", SHIRT_COLOURS),
        _builtin("blouse", "女士衬衫", "Blouse", {**SHIRT_COLOURS, "cream": (240, 232, 214)}),
        _builtin("school-uniform", "校服", "School uniform", SCHOOL_COLOURS),
    )
}


# ---------------------------------------------------------------------------------------------------------------
# User templates


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class UserTemplateFile(_Strict):
    """``<name>.json`` beside ``<name>.png``: titles and anchors in the PNG's pixels. ``colours`` (optional) recolour
    the whole PNG by its shading (each pixel's brightness relative to the clothes' median); leave them out for a
    template drawn in several colours (a jacket over a shirt): it is then used as drawn."""

    title_zh: str = Field(min_length=1)
    title_en: str = Field(min_length=1)
    eye_distance_px: float = Field(gt=4.0, le=2000.0)
    collar_xy: tuple[float, float]
    neck_width_px: float = Field(gt=0.0)
    shoulder_width_px: float = Field(gt=0.0)
    colours: dict[str, tuple[int, int, int]] = {}

    @model_validator(mode="after")
    def _sane(self) -> UserTemplateFile:
        if self.shoulder_width_px <= self.neck_width_px:
            raise ValueError("shoulder_width_px must exceed neck_width_px")
        for name, rgb in self.colours.items():
            if not _SLUG.match(name):
                raise ValueError(f"colour name {name!r} must be a lower-case slug")
            if not all(0 <= c <= 255 for c in rgb):
                raise ValueError(f"colour {name} must be three values in 0..255, got {list(rgb)}")
        return self


def load_attire_templates(folder: Path | str | None = None) -> dict[str, AttireTemplate]:
    """The built-in templates plus the user's in ``folder`` (each ``<name>.png`` RGBA with its ``<name>.json``); a
    malformed one is refused at start-up naming the file and the reason."""
    templates = dict(BUILTIN_TEMPLATES)
    if folder is None:
        return templates
    folder = Path(folder)
    if not folder.is_dir():
        raise InternalError(f"attire template folder {folder} does not exist", details={"file": str(folder)})
    for png in sorted(folder.glob("*.png")):
        if not png.with_suffix(".json").is_file():
            raise InternalError(f"attire template {png} has no {png.stem}.json beside it", details={"file": str(png)})
    for path in sorted(folder.glob("*.json")):
        template = _load_user_template(path)
        if template.name in templates:
            raise InternalError(
                f"attire template {path} is malformed: the name {template.name} is taken by a built-in template",
                details={"file": str(path)},
            )
        templates[template.name] = template
    return templates


def _load_user_template(path: Path) -> AttireTemplate:
    name, png = path.stem, path.with_suffix(".png")
    current = path
    try:
        if not _SLUG.match(name):
            raise ValueError(f"the name {name!r} must be a lower-case slug (a-z, 0-9, -)")
        spec = UserTemplateFile.model_validate(json.loads(path.read_text(encoding="utf-8")))
        current = png
        with Image.open(png) as image:
            if image.mode not in ("RGBA", "LA") and "transparency" not in image.info:
                raise ValueError(f"it must be a transparent PNG (RGBA), not mode {image.mode}")
            rgba = np.asarray(image.convert("RGBA"))
        if not (rgba[..., 3] >= 128).any():
            raise ValueError("it has no opaque pixel")
        current = path  # the anchors are the JSON's
        height, width = rgba.shape[:2]
        x, y = spec.collar_xy
        if not (0 <= x < width and 0 <= y < height):
            raise ValueError(f"collar_xy {list(spec.collar_xy)} lies outside the {width}x{height} image")
        if spec.shoulder_width_px > width:
            raise ValueError(f"shoulder_width_px {spec.shoulder_width_px} is wider than the image ({width} px)")
    except (OSError, ValueError, ValidationError, json.JSONDecodeError) as exc:
        raise InternalError(f"attire template {current} is malformed: {exc}", details={"file": str(current)}) from exc
    draw = functools.cache(functools.partial(_user_drawing, rgba, spec))
    return AttireTemplate(name, spec.title_zh, spec.title_en, dict(spec.colours), draw, builtin=False)


def _user_drawing(rgba: np.ndarray, spec: UserTemplateFile, colour: RGB | None) -> AttireDrawing:
    """A user's PNG as a drawing, recoloured by its shading when a colour is asked for."""
    alpha = rgba[..., 3:4].astype(np.float32) / 255.0
    rgb = rgba[..., :3].astype(np.float32)
    if colour is not None:
        brightness = rgb @ np.array([0.299, 0.587, 0.114], np.float32)
        median = float(np.median(brightness[rgba[..., 3] >= 128])) or 1.0
        rgb = np.asarray(colour, np.float32) * (brightness / median)[..., None]
    premultiplied = np.clip(np.dstack([rgb * alpha, alpha * 255.0]) + 0.5, 0, 255).astype(np.uint8)
    return AttireDrawing(
        rgba=premultiplied,
        skin=np.zeros(rgba.shape[:2] + (2,), np.uint8),
        collar_xy=spec.collar_xy,
        neck_width_px=spec.neck_width_px,
        shoulder_width_px=spec.shoulder_width_px,
        eye_distance_px=spec.eye_distance_px,
    )


DEFAULT_ATTIRE_FOLDER = Path(__file__).resolve().parents[2] / "configs" / "attire"


@functools.cache
def default_attire_templates() -> Mapping[str, AttireTemplate]:
    """The built-ins and the templates users dropped into ``configs/attire/`` (its README says how), loaded once per
    process: a malformed one stops the start naming its file."""
    return load_attire_templates(DEFAULT_ATTIRE_FOLDER)
