"""Portrait mattes: what the matting models return, and the refinement the ID photo applies at output size.

Two models, one per ``matting`` mode (per request, or per bucket route):

- ``modnet`` (default): MODNet photographic portrait matting at its reference size (short side 512); its matte keeps
  hair strands and soft edges, so it is used as it is after one resampling to the output.
- ``selfie`` (fast): MediaPipe selfie segmentation on a letterboxed 256x256 copy; its coarse matte is refined at the
  output resolution by an edge-aware guided filter steered by the image.

Either way the model's matte stays small (:class:`LowResMatte`: the matte on the model's canvas plus the affine
that maps original pixels onto it), so it crosses the object store cheaply and maps back exactly. Colour
decontamination (:func:`estimate_foreground`) removes the old background's tint from edge pixels so a new background
does not show a halo. Torch-free (the ingress imports this); the models run in :mod:`deployments.idphoto.predictor`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import cv2
import numpy as np

from deployments.common.affine import apply_affine, compose_affine, invert_affine, pixel_scale_affine
from deployments.common.engine import EngineInfo
from deployments.common.stage import StageCall
from deployments.common.weights import ModelSpec
from deployments.faces.tflite import TfliteModel

logger = logging.getLogger(__name__)

Matting = Literal["modnet", "selfie"]
MATTING_MODES: tuple[Matting, ...] = ("modnet", "selfie")
DEFAULT_MATTING: Matting = "modnet"
# Manifest entry of each mode's model.
MATTE_MODELS: dict[str, str] = {"modnet": "modnet", "selfie": "selfie-segmentation"}
SELFIE_SIZE_PX = 256
MODNET_REFERENCE_PX = 512  # MODNet's reference short side (its official inference geometry)
# Opening radius (face widths) that cuts an object's narrow contact with the person; the head and the chest are wider
# (a thinner neck may break: a seed on the chest keeps the body).
SEPARATION_FACE_WIDTHS = 0.2
# What the opening shaves off and stays this close to the person (face widths) is the person's: ears, hair locks.
PROTRUSION_FACE_WIDTHS = 0.25
REFINE_EPS = 1e-3  # the guided filter's regularisation (selfie mattes)


@dataclass(frozen=True, eq=False)
class LowResMatte:
    """A model's matte on its own canvas, the affine that maps original pixels onto it, and the mode that made it."""

    alpha: np.ndarray
    affine: np.ndarray
    source_shape: tuple[int, int]
    matting: Matting

    def warp_to(self, image_to_target: np.ndarray, size_wh: tuple[int, int]) -> np.ndarray:
        """The matte in a target frame given the ``original -> target`` affine (one resampling of a small array)."""
        low_to_target = compose_affine(image_to_target, invert_affine(self.affine))
        return cv2.warpAffine(
            self.alpha, low_to_target, size_wh, flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE
        )

    def matte_at(self, image_to_target: np.ndarray, size_wh: tuple[int, int], guide_rgb: np.ndarray) -> np.ndarray:
        """The final float32 matte in a target frame whose pixels are ``guide_rgb``.

        MODNet's matte is already fine-grained: it is only resampled. The selfie matte is coarse: the guided filter
        snaps it to the edges of ``guide_rgb``.
        """
        warped = self.warp_to(image_to_target, size_wh)
        if self.matting == "selfie":
            return refine_matte(warped, guide_rgb)
        return np.clip(warped, 0.0, 1.0)


@dataclass(frozen=True, eq=False)
class PhotoToMatte:
    """One photo (HxWx3 uint8 RGB) for the matting deployment and the mode to matte it with."""

    image: np.ndarray
    matting: Matting = DEFAULT_MATTING


def matte_engine_info(manifest: Mapping[str, ModelSpec], matting: Matting) -> EngineInfo:
    """The matting engine and weights behind ``SEGMENT_PORTRAIT`` in ``matting`` mode, as results report them."""
    spec = manifest[MATTE_MODELS[matting]]
    return EngineInfo(spec.engine, neural=True, weights=spec.name, sha256=spec.sha256)


PORTRAIT_MATTER = "PortraitMatter"
SEGMENT_PORTRAIT: StageCall[PhotoToMatte, LowResMatte] = StageCall(PORTRAIT_MATTER, "segment_batch")


def keep_subject(low: LowResMatte, points_xy: Sequence[tuple[float, float]], face_width_px: float) -> LowResMatte:
    """Drop matte regions not tied to the person at ``points_xy`` (original pixels: a point of the face and one of
    the chest per person): a lamp, a door frame or a chair back behind the shoulder, a neighbour's shoulder.

    On an ID photo anything that is not the person is background. Detached blobs are easy; an object that touches
    the person joins the same blob, but through a contact narrower than the person's head or chest. So the confident
    core (alpha >= 0.5) is opened with a disk of ``SEPARATION_FACE_WIDTHS`` of the face width (``face_width_px``,
    original pixels), which cuts such contacts, and the opening's components at the points are the person. What the
    opening shaved off comes back where it stays within ``PROTRUSION_FACE_WIDTHS`` of the person (ears, hair locks,
    a thin neck), and is dropped where it reaches further (a door post, a chair's back, another person). Soft pixels
    within reach are kept (2 % of the canvas for MODNet, whose soft hair reaches further out than the selfie model's
    blur) and the result feathered. An object lying along the person's outline (a wide contact) stays, and so does
    the part of an object next to a wide contact: no outline test tells it from the person.
    """
    core = (low.alpha >= 0.5).astype(np.uint8)
    canvas_scale = float(np.hypot(low.affine[0, 0], low.affine[0, 1]))
    seeds = [
        (int(x), int(y))
        for x, y in np.round(apply_affine(low.affine, np.asarray(points_xy, dtype=np.float64))).astype(int)
        if 0 <= x < core.shape[1] and 0 <= y < core.shape[0] and core[y, x]
    ]
    if not seeds:
        logger.debug("no subject point lies on the matte; keeping every blob")
        return low
    face_px = face_width_px * canvas_scale
    subject = _subject_core(
        core,
        seeds,
        max(1, int(round(SEPARATION_FACE_WIDTHS * face_px))),
        max(2.0, PROTRUSION_FACE_WIDTHS * face_px),
    )
    reach = 2 if low.matting == "selfie" else max(2, int(round(0.02 * max(core.shape))))
    # Soft edges within reach stay; the confident core of anything else does not.
    keep = _within(subject, reach, inside=False) & (subject | (1 - core))
    weight = cv2.GaussianBlur(keep.astype(np.float32), (5, 5), 0)
    return LowResMatte(alpha=low.alpha * weight, affine=low.affine, source_shape=low.source_shape, matting=low.matting)


def _subject_core(core: np.ndarray, seeds: list[tuple[int, int]], radius_px: int, protrusion_px: float) -> np.ndarray:
    """The part of ``core`` (uint8 0/1) that is the person at ``seeds``: the opening's components there, plus what
    the opening shaved off where it stays within ``protrusion_px`` of them. Erosion and dilation by a disk are
    thresholds of distance transforms: linear in the canvas whatever the radius."""
    _, labels = cv2.connectedComponents(_within(core, radius_px, inside=True), connectivity=8)
    ids = sorted({_label_below(labels, seed, 2 * radius_px) for seed in seeds} - {0})
    if not ids:
        # The erosion removed every seed (a thin subject): keep the core's components there.
        _, labels = cv2.connectedComponents(core, connectivity=8)
        return np.isin(labels, [labels[y, x] for x, y in seeds]).astype(np.uint8)
    # Grown back 2 px further than eroded: the distance transforms' rounding must not leave a ring around the person
    # that would join an ear to a touching object.
    person = _within(np.isin(labels, ids).astype(np.uint8), radius_px + 2, inside=False) & core
    residue = core & (1 - person)
    if not residue.any():
        return person
    _, parts = cv2.connectedComponents(residue, connectivity=8)
    far = cv2.distanceTransform(1 - person, cv2.DIST_L2, 3) > protrusion_px
    reaching = np.unique(parts[far & (parts > 0)])
    return person | (residue & ~np.isin(parts, reaching)).astype(np.uint8)


def _label_below(labels: np.ndarray, seed: tuple[int, int], reach_px: int) -> int:
    """The component at ``seed``, or the first one within ``reach_px`` below it (a chest point just above the
    eroded body, where a thin neck broke)."""
    x, y = seed
    column = labels[y : y + reach_px + 1, x]
    found = column[column > 0]
    return int(found[0]) if found.size else 0


def _within(mask: np.ndarray, radius_px: float, *, inside: bool) -> np.ndarray:
    """Erosion (``inside``: pixels farther than ``radius_px`` from the mask's outside) or dilation (pixels within
    ``radius_px`` of the mask) of a uint8 0/1 mask by a disk."""
    if inside:
        return (cv2.distanceTransform(mask, cv2.DIST_L2, 5) > radius_px).astype(np.uint8)
    return (cv2.distanceTransform(1 - mask, cv2.DIST_L2, 5) <= radius_px).astype(np.uint8)


class SelfieSegmenter:
    """MediaPipe selfie segmentation (one interpreter per thread); the ``selfie`` mode's model."""

    def __init__(self, model_path: Path | str, *, num_threads: int = 1) -> None:
        self.model = TfliteModel(Path(model_path), num_threads=num_threads)

    def segment(self, rgb: np.ndarray) -> LowResMatte:
        """Coarse person matte of a whole photo at 256x256; cost is independent of the photo size."""
        small, affine = letterbox(rgb, SELFIE_SIZE_PX)
        tensor = (small.astype(np.float32) * (1.0 / 255.0))[None]
        alpha = self.model.run(tensor)[0][0, :, :, 0]
        return LowResMatte(
            alpha=np.ascontiguousarray(alpha, dtype=np.float32),
            affine=affine,
            source_shape=rgb.shape[:2],
            matting="selfie",
        )


def letterbox(rgb: np.ndarray, size_px: int) -> tuple[np.ndarray, np.ndarray]:
    """Fit ``rgb`` into a ``size_px`` square, centred (MediaPipe's letterbox), and return ``original -> square``.

    Large photos are first decimated by an integer stride to about twice the target, so a 12 MP frame costs a
    sub-millisecond strided copy instead of a full-frame resize; the remaining 2x step is a linear warp.
    """
    height, width = rgb.shape[:2]
    stride = max(1, int(max(height, width) // (2 * size_px)))
    reduced = np.ascontiguousarray(rgb[::stride, ::stride])
    scale = size_px / (max(height, width) / stride)
    pad_x = (size_px - scale * width / stride) / 2.0
    pad_y = (size_px - scale * height / stride) / 2.0
    reduced_to_square = pixel_scale_affine(scale, shift_xy=(pad_x, pad_y))
    # Sample j of the reduced image sits at original j*stride (a plain scale, not about pixel centres).
    original_to_reduced = np.array([[1.0 / stride, 0.0, 0.0], [0.0, 1.0 / stride, 0.0]])
    square = cv2.warpAffine(
        reduced,
        reduced_to_square,
        (size_px, size_px),
        flags=cv2.INTER_LINEAR,
        borderMode=cv2.BORDER_CONSTANT,
        borderValue=(0, 0, 0),
    )
    return square, compose_affine(reduced_to_square, original_to_reduced)


def refine_matte(
    coarse: np.ndarray, guide_rgb: np.ndarray, *, radius_px: int | None = None, eps: float = REFINE_EPS
) -> np.ndarray:
    """Colour guided filter (He et al.): the output follows the coarse matte but snaps its edges to image edges.

    The radius scales with the image (about 1.2 % of the diagonal) so the filter covers the coarse matte's blur.
    Coefficients are solved at half resolution and applied at full resolution ("fast guided filter"), which keeps
    edges sharp at a quarter of the cost. The result is stretched so near-certain values become exactly 0 or 1.
    """
    height, width = coarse.shape
    if radius_px is None:
        radius_px = refine_radius_px(height, width)
    guide = guide_rgb.astype(np.float32) * (1.0 / 255.0)
    p = coarse.astype(np.float32)
    subsample = 2 if min(height, width) >= 128 else 1
    small_wh = (width // subsample, height // subsample)
    guide_small = cv2.resize(guide, small_wh, interpolation=cv2.INTER_AREA) if subsample > 1 else guide
    p_small = cv2.resize(p, small_wh, interpolation=cv2.INTER_AREA) if subsample > 1 else p
    coefficients = guided_coefficients(guide_small, p_small, max(1, radius_px // subsample), eps)
    if subsample > 1:
        coefficients = [cv2.resize(c, (width, height), interpolation=cv2.INTER_LINEAR) for c in coefficients]
    return apply_guided(coefficients, guide)


def refine_radius_px(height: int, width: int) -> int:
    """The guided filter's radius for a matte of ``height`` x ``width`` (about 1.2 % of its diagonal)."""
    return max(2, int(round(0.012 * np.hypot(height, width))))


def apply_guided(coefficients: Sequence[np.ndarray], guide: np.ndarray) -> np.ndarray:
    """The refined matte where the guided filter's ``(a_r, a_g, a_b, b)`` (four float32 HxW planes) meet the guide's
    pixels (HxWx3 float32 in [0, 1]), stretched so near-certain values become exactly 0 or 1."""
    a_r, a_g, a_b, bias = coefficients
    refined = a_r * guide[..., 0] + a_g * guide[..., 1] + a_b * guide[..., 2] + bias
    return np.clip((refined - 0.12) * (1.0 / 0.84), 0.0, 1.0).astype(np.float32)


def guided_coefficients(guide: np.ndarray, p: np.ndarray, radius_px: int, eps: float) -> list[np.ndarray]:
    """Box-averaged linear coefficients ``(a_r, a_g, a_b, b)`` of the colour guided filter.

    Works on 2-D planes: numpy broadcasting over a trailing axis of 3 runs several times slower than plane arithmetic.
    """
    ksize = (2 * radius_px + 1, 2 * radius_px + 1)

    def mean(x: np.ndarray) -> np.ndarray:
        return cv2.boxFilter(x, -1, ksize, borderType=cv2.BORDER_REFLECT)

    r, g, b = (np.ascontiguousarray(guide[..., c]) for c in range(3))
    mr, mg, mb, mean_p = mean(r), mean(g), mean(b), mean(p)
    c_r = mean(r * p) - mr * mean_p
    c_g = mean(g * p) - mg * mean_p
    c_b = mean(b * p) - mb * mean_p
    # Symmetric 3x3 covariance of the guide per pixel (six unique entries), regularised by eps.
    s_rr = mean(r * r) - mr * mr + eps
    s_rg = mean(r * g) - mr * mg
    s_rb = mean(r * b) - mr * mb
    s_gg = mean(g * g) - mg * mg + eps
    s_gb = mean(g * b) - mg * mb
    s_bb = mean(b * b) - mb * mb + eps
    # Closed-form inverse via the adjugate.
    i_rr = s_gg * s_bb - s_gb * s_gb
    i_rg = s_gb * s_rb - s_rg * s_bb
    i_rb = s_rg * s_gb - s_gg * s_rb
    i_gg = s_rr * s_bb - s_rb * s_rb
    i_gb = s_rb * s_rg - s_rr * s_gb
    i_bb = s_rr * s_gg - s_rg * s_rg
    inv_det = 1.0 / (s_rr * i_rr + s_rg * i_rg + s_rb * i_rb)
    a_r = (c_r * i_rr + c_g * i_rg + c_b * i_rb) * inv_det
    a_g = (c_r * i_rg + c_g * i_gg + c_b * i_gb) * inv_det
    a_b = (c_r * i_rb + c_g * i_gb + c_b * i_bb) * inv_det
    bias = mean_p - a_r * mr - a_g * mg - a_b * mb
    return [mean(a_r), mean(a_g), mean(a_b), mean(bias)]


def estimate_foreground(rgb: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """Foreground colours with the old background removed from semi-transparent pixels (float32 RGB in [0, 1]).

    Blur-fusion estimate (Forte & Pitié, 2021): local means of foreground and background colours, weighted by the
    matte, then each pixel's residual against the compositing equation is pushed into the foreground. The local
    means are smooth, so both passes (a wide one to reach across thick hair, a narrow one for detail) run at half
    resolution; only the final correction runs per pixel. Pixels with alpha 1 are unchanged. (The matte step's
    cut-out, ``deployments.idphoto.steps.cut_out``, runs the same two parts a band of rows at a time.)
    """
    height, width = alpha.shape
    image = rgb.astype(np.float32) * (1.0 / 255.0)
    a_full = alpha.astype(np.float32)
    small_wh = (max(1, width // 2), max(1, height // 2))
    image_small = cv2.resize(image, small_wh, interpolation=cv2.INTER_AREA)
    a_small = cv2.resize(a_full, small_wh, interpolation=cv2.INTER_AREA)
    mean_f, mean_b = local_colours(image_small, a_small)
    mean_f = cv2.resize(mean_f, (width, height), interpolation=cv2.INTER_LINEAR)
    mean_b = cv2.resize(mean_b, (width, height), interpolation=cv2.INTER_LINEAR)
    decontaminate(image, a_full, mean_f, mean_b)
    return image


def local_colours(image: np.ndarray, alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The blur fusion's smooth part on a coarse grid: the local mean colours of the subject and of the background
    around each pixel (float32 HxWx3 each) of ``image`` (float32 RGB in [0, 1]) under ``alpha`` (float32 HxW)."""
    a = np.repeat(alpha[..., None], 3, axis=2)
    diagonal = float(np.hypot(image.shape[1], image.shape[0]))
    foreground, background = image, image
    for radius in (max(3, int(0.08 * diagonal)), max(1, int(0.006 * diagonal))):
        foreground, background = _blur_fusion_step(image, foreground, background, a, radius)
    return _local_mean(foreground, a, 1), background


def decontaminate(image: np.ndarray, alpha: np.ndarray, mean_f: np.ndarray, mean_b: np.ndarray) -> None:
    """The blur fusion's per-pixel part, in place: each semi-transparent pixel of ``image`` (float32 RGB in [0, 1])
    takes its residual against the compositing equation, given the local colours at the same pixels; elsewhere the
    image is the foreground."""
    band = (alpha > 0.002) & (alpha < 0.998)
    a = alpha[band][:, None]
    f, b = mean_f[band], mean_b[band]
    image[band] = np.clip(f + a * (image[band] - a * f - (1.0 - a) * b), 0.0, 1.0)


def upsample_rows(values: np.ndarray, size_wh: tuple[int, int], top: int, bottom: int) -> np.ndarray:
    """Rows ``top:bottom`` of ``cv2.resize(values, size_wh, interpolation=cv2.INTER_LINEAR)`` (float32 HxW or
    HxWxC), made from the grid rows they need only: the same values within float rounding, without the whole."""
    width, height = size_wh
    grid_rows = values.shape[0]
    ys = np.clip((np.arange(top, bottom, dtype=np.float64) + 0.5) * (grid_rows / height) - 0.5, 0.0, grid_rows - 1)
    lower = np.floor(ys).astype(np.intp)
    upper = np.minimum(lower + 1, grid_rows - 1)
    first, last = int(lower[0]), int(upper[-1])
    # Width only (the same columns as the whole resize), then the rows blended as cv2 blends them.
    wide = cv2.resize(values[first : last + 1], (width, last - first + 1), interpolation=cv2.INTER_LINEAR)
    weight = (ys - lower).astype(np.float32).reshape((-1,) + (1,) * (values.ndim - 1))
    return wide[lower - first] * (1.0 - weight) + wide[upper - first] * weight


def _local_mean(values: np.ndarray, weights: np.ndarray, radius: int) -> np.ndarray:
    ksize = (2 * radius + 1, 2 * radius + 1)
    return cv2.blur(values * weights, ksize) / (cv2.blur(weights, ksize) + 1e-5)


def _blur_fusion_step(
    image: np.ndarray, foreground: np.ndarray, background: np.ndarray, a: np.ndarray, radius: int
) -> tuple[np.ndarray, np.ndarray]:
    one_minus_a = 1.0 - a
    blurred_f = _local_mean(foreground, a, radius)
    blurred_b = _local_mean(background, one_minus_a, radius)
    foreground = blurred_f + a * (image - a * blurred_f - one_minus_a * blurred_b)
    return foreground, blurred_b
