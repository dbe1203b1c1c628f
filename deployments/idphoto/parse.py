"""Which part of a portrait each pixel shows: background, hair, body skin, face skin, clothes or others.

Formal clothes belong on the person's clothes and the skin below the chin, not on hair that falls on the shoulders,
and a seam between the neck and a new collar is judged by what shows there; both need this map. Two engines, each
named in what it returns:

- ``selfie-multiclass``: MediaPipe's selfie multiclass segmenter (256x256, six classes), where its weights are in the
  model store (manifest entry ``selfie-multiclass``: a download, fetched only when named).
- ``matte+face-mesh`` (:func:`parse_portrait`): from what the ID photo already has. The matte is the person, the face
  mesh's oval the face, the face's own skin colour (between the mouth and the chin) finds the neck, ears and arms,
  and the hair is the person's non-skin pixels around the head whose colour matches the hair above the forehead and
  that connect to it; the rest of the person is clothes. It finds no accessories (``others``).

Labels use MediaPipe's class numbers, so both engines fill the same :class:`PortraitParse`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from deployments.common.errors import InternalError, InvalidParameter
from deployments.common.image import require_image
from deployments.common.weights import ModelStore
from deployments.faces.tflite import TfliteModel
from deployments.faces.types import Face

BACKGROUND, HAIR, BODY_SKIN, FACE_SKIN, CLOTHES, OTHERS = range(6)
REGIONS = ("background", "hair", "body_skin", "face_skin", "clothes", "others")
MULTICLASS_MODEL = "selfie-multiclass"  # its manifest entry
MULTICLASS_SIZE_PX = 256
FALLBACK_ENGINE = "matte+face-mesh"
# MediaPipe's canonical face mesh: the face's outline, forehead to chin and back.
FACE_OVAL = (
    10, 338, 297, 332, 284, 251, 389, 356, 454, 323, 361, 288, 397, 365, 379, 378, 400, 377,
    152, 148, 176, 149, 150, 136, 172, 58, 132, 93, 234, 127, 162, 21, 54, 103, 67, 109,
)  # fmt: skip
WORK_EYE_PX = 40.0  # the fallback reads colours on a grid this fine (pixels per eye distance); finer photos shrink
SKIN_CHROMA = 12.0  # YCrCb chroma distance from the face's skin within which a pixel is skin
SKIN_MIN_LUMA = 0.35  # ... unless it is darker than this share of the skin's luma (a dark collar, not a shadow)
HAIR_SPREAD_FLOOR = (6.0, 3.0, 3.0)  # CIELAB: the least spread the hair's colour is read with (uniform hair)
HAIR_RADIUS = 2.5  # a pixel is hair-coloured within this many spreads of the hair's median colour
HAIR_REACH_E = (3.5, 4.0)  # hair is looked for this far beside the face's axis and below the chin (E)
HAIR_TIDY_E = 0.1  # below the chin, hair narrower than twice this is a strap or a stray lock (E), holes as narrow fill
HAIR_SPREAD_E = 0.3  # below the chin, hair stays within this of the columns it fills beside the jaw
_COLUMN_E = 0.05
MIN_HAIR_SEED_PX = 12  # fewer hair pixels above the forehead (at the working scale): no hair colour to follow


@dataclass(frozen=True, eq=False)
class PortraitParse:
    """The region of every pixel of one photo (``labels``: HxW uint8 with MediaPipe's class numbers, 0 background,
    1 hair, 2 body skin, 3 face skin, 4 clothes, 5 others) and the engine that labelled them."""

    labels: np.ndarray
    engine: str

    def mask(self, *regions: int) -> np.ndarray:
        """Where any of ``regions`` is (HxW bool)."""
        table = np.zeros(len(REGIONS), bool)
        table[list(regions)] = True
        return table[self.labels]

    @property
    def background(self) -> np.ndarray:
        return self.labels == BACKGROUND

    @property
    def hair(self) -> np.ndarray:
        return self.labels == HAIR

    @property
    def body_skin(self) -> np.ndarray:
        return self.labels == BODY_SKIN

    @property
    def face_skin(self) -> np.ndarray:
        return self.labels == FACE_SKIN

    @property
    def clothes(self) -> np.ndarray:
        return self.labels == CLOTHES

    @property
    def others(self) -> np.ndarray:
        return self.labels == OTHERS


# ---------------------------------------------------------------------------------------------------------------
# MediaPipe selfie multiclass


class MulticlassParser:
    """MediaPipe's selfie multiclass segmenter (one interpreter per thread): the photo stretched to 256x256 with
    values in [0, 1], as MediaPipe's image segmenter feeds it; six class scores per pixel, resized to the photo, the
    highest wins."""

    def __init__(self, model_path: Path | str, engine: str, *, num_threads: int = 1) -> None:
        self.model = TfliteModel(Path(model_path), num_threads=num_threads)
        self.engine = engine
        if self.model.input_shape != (1, MULTICLASS_SIZE_PX, MULTICLASS_SIZE_PX, 3):
            raise InternalError(
                f"{Path(model_path).name} takes {self.model.input_shape}, not the selfie multiclass model's "
                f"(1, {MULTICLASS_SIZE_PX}, {MULTICLASS_SIZE_PX}, 3)"
            )

    @classmethod
    def from_store(cls, store: ModelStore, *, num_threads: int = 1) -> MulticlassParser | None:
        """The parser when its weights are in ``store``; ``None`` when they are absent (use :func:`parse_portrait`)."""
        path = store.find(MULTICLASS_MODEL)
        if path is None:
            return None
        return cls(path, store.spec(MULTICLASS_MODEL).engine, num_threads=num_threads)

    def parse(self, rgb: np.ndarray) -> PortraitParse:
        """The regions of ``rgb`` (image contract: HxWx3 uint8 RGB)."""
        require_image(rgb)
        small = cv2.resize(rgb, (MULTICLASS_SIZE_PX, MULTICLASS_SIZE_PX), interpolation=cv2.INTER_AREA)
        scores = self.model.run((small.astype(np.float32) * np.float32(1.0 / 255.0))[None])[0]
        return PortraitParse(labels_from_scores(scores, rgb.shape[:2]), self.engine)


def labels_from_scores(scores: np.ndarray, shape_hw: tuple[int, int]) -> np.ndarray:
    """The label map (HxW uint8) of the model's six class scores (``(1, h, w, 6)``, logits or probabilities: the
    highest wins either way), each score plane resized (bilinear) to ``shape_hw`` first so edges fall between the
    model's pixels."""
    planes = np.asarray(scores, np.float32)
    if planes.ndim == 4 and planes.shape[0] == 1:
        planes = planes[0]
    if planes.ndim != 3 or planes.shape[-1] != len(REGIONS):
        raise InternalError(f"the multiclass model answered scores of shape {np.shape(scores)}, not (1, h, w, 6)")
    height, width = shape_hw
    resized = np.dstack(
        [cv2.resize(planes[..., k], (width, height), interpolation=cv2.INTER_LINEAR) for k in range(len(REGIONS))]
    )
    return np.argmax(resized, axis=-1).astype(np.uint8)


# ---------------------------------------------------------------------------------------------------------------
# The fallback: matte, face mesh and the face's own colours


def parse_portrait(rgb: np.ndarray, alpha: np.ndarray, faces: Sequence[Face]) -> PortraitParse:
    """The regions of ``rgb`` (HxWx3 uint8 RGB) from its matte ``alpha`` (HxW, float in [0, 1] or uint8) and its
    ``faces`` (each face's head labelled in turn, the largest last). Colours are read on a grid of
    ``WORK_EYE_PX`` pixels per eye distance (a 2 MP portrait shrinks about 3x), the person's outline at full
    resolution."""
    require_image(rgb)
    if alpha.shape != rgb.shape[:2]:
        raise InvalidParameter(f"the matte is {alpha.shape}, the photo {rgb.shape[:2]}")
    if not faces:
        raise InvalidParameter("a portrait parse needs at least one face")
    height, width = rgb.shape[:2]
    person = alpha >= (128 if alpha.dtype == np.uint8 else 0.5)
    scale = min(1.0, WORK_EYE_PX / max(1.0, min(face.eye_distance_px for face in faces)))
    size_wh = (max(1, round(width * scale)), max(1, round(height * scale)))
    if size_wh == (width, height):
        small_rgb, small_person = rgb, person
    else:
        small_rgb = cv2.resize(rgb, size_wh, interpolation=cv2.INTER_AREA)
        coverage = cv2.resize(person.astype(np.float32), size_wh, interpolation=cv2.INTER_AREA)
        small_person = coverage >= 0.5
    factors = (size_wh[0] / width, size_wh[1] / height)
    parts = np.full(small_person.shape, CLOTHES, np.uint8)
    frame_colours = _Colours.of(small_rgb)
    for face in sorted(faces, key=lambda f: f.eye_distance_px):
        patch = chin_patch(rgb, face)
        reference = skin_reference(patch) if patch.size else None  # a chin off the photo: no skin colour
        _label_head(parts, frame_colours, small_person, _HeadFrame.of(face, factors), reference)
    if parts.shape != (height, width):
        parts = cv2.resize(parts, (width, height), interpolation=cv2.INTER_NEAREST)
    return PortraitParse(np.where(person, parts, np.uint8(BACKGROUND)).astype(np.uint8), FALLBACK_ENGINE)


@dataclass(frozen=True)
class _Colours:
    """The working image in YCrCb (skin) and CIELAB (hair), float32."""

    ycc: np.ndarray
    lab: np.ndarray

    @classmethod
    def of(cls, rgb: np.ndarray) -> _Colours:
        lab = cv2.cvtColor(rgb.astype(np.float32) * np.float32(1.0 / 255.0), cv2.COLOR_RGB2Lab)
        return cls(ycrcb(rgb), lab)


@dataclass(frozen=True)
class _HeadFrame:
    """One face at the working scale: the eyes' midpoint, the face's axes (unit vectors right and down), the eye
    distance (px), the lowest point of the face (along ``down``, E below the eyes) and the face's outline (Nx2)."""

    eye_mid: np.ndarray
    right: np.ndarray
    down: np.ndarray
    eye_px: float
    chin_e: float
    oval: np.ndarray

    @classmethod
    def of(cls, face: Face, factors: tuple[float, float]) -> _HeadFrame:
        scale = np.asarray(factors, np.float64)

        def to_work(points: np.ndarray) -> np.ndarray:
            return (np.asarray(points, np.float64) + 0.5) * scale - 0.5

        eyes = to_work(face.landmarks[:2])
        eye_px = max(1e-6, float(np.linalg.norm(eyes[1] - eyes[0])))
        right = (eyes[1] - eyes[0]) / eye_px
        down = np.array([-right[1], right[0]])
        eye_mid = eyes.mean(axis=0)
        if face.mesh is not None:
            mesh = to_work(face.mesh)
            oval = mesh[list(FACE_OVAL)]
            chin_e = float(((mesh - eye_mid) @ down).max()) / eye_px
        else:
            chin_e = float((to_work(np.asarray([face.chin]))[0] - eye_mid) @ down) / eye_px
            oval = _face_ellipse(eye_mid, right, down, eye_px, chin_e)
        return cls(eye_mid, right, down, eye_px, chin_e, oval)

    def coordinates_e(self, shape_hw: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
        """Every pixel in eye distances from the eyes' midpoint: across (right) and down the face."""
        ys, xs = np.mgrid[: shape_hw[0], : shape_hw[1]].astype(np.float32)
        dx, dy = xs - np.float32(self.eye_mid[0]), ys - np.float32(self.eye_mid[1])
        inv = np.float32(1.0 / self.eye_px)
        u = (dx * np.float32(self.right[0]) + dy * np.float32(self.right[1])) * inv
        v = (dx * np.float32(self.down[0]) + dy * np.float32(self.down[1])) * inv
        return u, v


def _face_ellipse(eye_mid: np.ndarray, right: np.ndarray, down: np.ndarray, eye_px: float, chin_e: float) -> np.ndarray:
    """Without a mesh: an ellipse from a forehead one eye distance above the eyes down to the chin, two eye
    distances wide."""
    top_e = -1.0
    centre = eye_mid + down * eye_px * (top_e + chin_e) / 2.0
    angles = np.linspace(0.0, 2.0 * np.pi, 36, endpoint=False)
    half_height = eye_px * (chin_e - top_e) / 2.0
    return centre + np.outer(np.cos(angles) * eye_px, right) + np.outer(np.sin(angles) * half_height, down)


def _label_head(
    parts: np.ndarray, colours: _Colours, person: np.ndarray, head: _HeadFrame, skin_ref: np.ndarray | None
) -> None:
    """Label one head's face, hair and the body's skin in ``parts`` (working scale, in place).

    Outside the face's outline, the person above the forehead (a bald crown too) and its non-skin pixels beside the
    face (down to the jaw) are hair; from there hair grows through pixels of the colour of the non-skin hair above
    the forehead, down onto the shoulders (skin-coloured pixels join only above the brows: fair hair; a fringe
    inside the outline only where it is not skin). Below the chin it is kept only where it falls from beside the
    jaw and is wider than a strap. Skin beside the face is the face's (ears); below the chin, the body's (neck,
    arms)."""
    shape = parts.shape
    u, v = head.coordinates_e(shape)
    oval = np.zeros(shape, np.uint8)
    cv2.fillPoly(oval, [np.round(head.oval).astype(np.int32)], 1)
    oval = oval.astype(bool)
    skin = skin_like(colours.ycc, skin_ref) if skin_ref is not None else np.zeros(shape, bool)
    above_brows = v < -0.45
    head_zone = person & ~oval & (v < head.chin_e - 0.3) & (np.abs(u) < 1.6)
    crown = head_zone & (v < -0.6)
    hair = crown | (head_zone & ~skin)
    if np.count_nonzero(crown & ~skin) >= MIN_HAIR_SEED_PX:
        zone = (np.abs(u) < HAIR_REACH_E[0]) & (v < head.chin_e + HAIR_REACH_E[1])
        allowed = np.where(oval, above_brows & ~skin, above_brows | ~skin)
        candidate = person & zone & allowed & _hair_coloured(colours.lab, crown & ~skin)
        count, components = cv2.connectedComponents((candidate | hair).astype(np.uint8), connectivity=8)
        touching = np.zeros(count, bool)
        touching[np.unique(components[hair])] = True
        touching[0] = False
        hair = touching[components]
        below = v > head.chin_e
        falling = _tidy(hair, HAIR_TIDY_E * head.eye_px) & _beside_jaw_columns(hair, u, v, head.chin_e)
        hair = (hair & ~below) | (falling & below)
    face = (oval & ~hair) | (head_zone & skin & ~hair)
    body = skin & person & ~oval & ~hair & (v >= head.chin_e - 0.1)
    parts[body] = BODY_SKIN
    parts[hair] = HAIR
    parts[face] = FACE_SKIN


def _beside_jaw_columns(hair: np.ndarray, u: np.ndarray, v: np.ndarray, chin_e: float) -> np.ndarray:
    """Where hair below the chin may be: in the columns of the face's frame that the hair fills beside the jaw, or
    within ``HAIR_SPREAD_E`` of them (hair falls; a dark jacket that touches dark hair spreads across the chest)."""
    bins = np.floor(u / _COLUMN_E).astype(np.int32)
    at_jaw = hair & (v >= chin_e - 0.6) & (v <= chin_e)
    if not at_jaw.any():
        return np.zeros(hair.shape, bool)
    offset = int(bins.min())
    filled = np.zeros(int(bins.max()) - offset + 1, np.uint8)
    filled[np.unique(bins[at_jaw]) - offset] = 1
    reach = round(HAIR_SPREAD_E / _COLUMN_E)
    near = cv2.dilate(filled[None, :], np.ones((1, 2 * reach + 1), np.uint8))[0].astype(bool)
    return near[bins - offset]


def _tidy(mask: np.ndarray, radius_px: float) -> np.ndarray:
    """``mask`` without strands narrower than ``2 * radius_px`` and with holes that narrow filled (opening, then
    closing, by a disc)."""
    size = 2 * max(1, round(radius_px)) + 1
    disc = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (size, size))
    opened = cv2.morphologyEx(mask.astype(np.uint8), cv2.MORPH_OPEN, disc)
    return cv2.morphologyEx(opened, cv2.MORPH_CLOSE, disc).astype(bool)


def _hair_coloured(lab: np.ndarray, seed: np.ndarray) -> np.ndarray:
    """Pixels within ``HAIR_RADIUS`` spreads (median absolute deviations, at least ``HAIR_SPREAD_FLOOR``) of the
    seed's median CIELAB colour."""
    samples = lab[seed]
    centre = np.median(samples, axis=0)
    spread = np.maximum(1.4826 * np.median(np.abs(samples - centre), axis=0), HAIR_SPREAD_FLOOR)
    distance = (((lab - centre) / spread.astype(np.float32)) ** 2).sum(axis=-1)
    return distance < HAIR_RADIUS**2


def chin_patch(rgb: np.ndarray, face: Face) -> np.ndarray:
    """The face's skin between the mouth and the chin (Nx1x3 uint8 RGB; empty off the photo): lit like the neck."""
    lip = (np.asarray(face.landmarks[3], np.float64) + np.asarray(face.landmarks[4], np.float64)) / 2.0
    x, y = np.round((lip + np.asarray(face.chin, np.float64)) / 2.0).astype(int)
    reach = max(1, round(0.12 * face.eye_distance_px))
    return rgb[max(0, y - reach) : y + reach + 1, max(0, x - reach) : x + reach + 1].reshape(-1, 1, 3)


def skin_reference(patch: np.ndarray) -> np.ndarray:
    """The skin colour of ``patch`` (Nx1x3 uint8 RGB, not empty) as its YCrCb median (float32)."""
    return np.median(cv2.cvtColor(patch, cv2.COLOR_RGB2YCrCb).reshape(-1, 3).astype(np.float32), axis=0)


def skin_like(ycc: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Which pixels (YCrCb, float32: :func:`ycrcb`) look like the skin ``reference``: chroma within ``SKIN_CHROMA``
    of it and not much darker (a shadow stays skin, a dark collar does not)."""
    chroma = np.hypot(ycc[..., 1] - reference[1], ycc[..., 2] - reference[2])
    return (chroma < SKIN_CHROMA) & (ycc[..., 0] > SKIN_MIN_LUMA * reference[0])


def ycrcb(rgb: np.ndarray) -> np.ndarray:
    """RGB pixels (any shape ending in 3, uint8) in YCrCb, float32, in the same shape."""
    pixels = np.ascontiguousarray(rgb, np.uint8)
    return cv2.cvtColor(pixels.reshape(-1, 1, 3), cv2.COLOR_RGB2YCrCb).reshape(pixels.shape).astype(np.float32)
