"""The photo's pixels for one framing, at any size: warp, matte, relight, touch up the person, composite; and the
HD copy, the same crop rendered with more pixels. The pipeline calls :func:`render_photo` once for the photo and
:func:`make_hd_copy` when ``hd`` is asked for, so both always carry the same look."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from deployments.common.timings import Timings
from deployments.idphoto.background import composite, fit_background, render_background
from deployments.idphoto.geometry import Framing, subject_alpha, warp_to_output
from deployments.idphoto.lighting import correct_lighting, mean_delta_e
from deployments.idphoto.matte import LowResMatte, estimate_foreground
from deployments.idphoto.output import encode_photo, hd_size, scale_affine
from deployments.idphoto.params import TRANSPARENT, IdPhotoParams, hex_to_rgb
from deployments.idphoto.report import face_region
from deployments.idphoto.specs import IdSpec
from deployments.idphoto.touchup import touch_up
from deployments.idphoto.watermark import draw_watermark


@dataclass(frozen=True, eq=False)
class HdPhoto:
    """The HD copy: same crop and look as the photo, more pixels (same media type)."""

    data: bytes
    size_wh: tuple[int, int]
    dpi: float

    def to_json(self) -> dict[str, Any]:
        return {"width": self.size_wh[0], "height": self.size_wh[1], "dpi": self.dpi, "bytes": len(self.data)}


@dataclass(frozen=True, eq=False)
class RenderedPhoto:
    """A composited photo (or the decontaminated subject when transparent), its matte (float32, [0, 1]), whether the
    source cuts the shoulders, and how far the face colour moved."""

    rgb: np.ndarray
    alpha: np.ndarray
    background: np.ndarray | None
    shoulders_cut: bool = False  # the body runs into the source's edge inside the frame
    skin_delta_e: float | None = None  # mean CIELAB ΔE of the face between the source and the result

    @property
    def alpha_u8(self) -> np.ndarray | None:
        """The alpha channel to encode: only a transparent photo has one."""
        if self.background is not None:
            return None
        return np.clip(self.alpha * 255.0 + 0.5, 0, 255).astype(np.uint8)


def render_photo(
    rgb: np.ndarray,
    low: LowResMatte,
    framing: Framing,
    params: IdPhotoParams,
    colour: str,
    timings: Timings,
    background_image: np.ndarray | None = None,
) -> RenderedPhoto:
    """Warp, matte, relight, touch up the person (after matting, before compositing) and composite, at the size
    of ``framing`` (the photo's, or the HD copy's through :func:`scale_framing`), over ``colour`` or, when given,
    ``background_image`` (uint8 RGB, fitted to cover the photo)."""
    affine, size_wh = framing.affine, framing.size_wh
    with timings.phase("warp_ms"):
        crop = warp_to_output(rgb, affine, size_wh)
    with timings.phase("refine_ms"):
        alpha, shoulders_cut = subject_alpha(low, framing, crop)
    face = face_region(size_wh[::-1], np.asarray(framing.eyes_out), framing.chin_out) & (alpha > 0.9)
    with timings.phase("lighting_ms"):
        lit = correct_lighting(crop, alpha > 0.5, params.lighting, face)
    with timings.phase("compose_ms"):
        foreground = estimate_foreground(lit, alpha)
    with timings.phase("touchup_ms"):
        foreground = touch_up(foreground, params.touchups())
    with timings.phase("compose_ms"):
        background = None
        if background_image is not None:
            background = fit_background(background_image, size_wh)
        elif colour != TRANSPARENT:
            background = render_background(hex_to_rgb(colour), size_wh, params.render)
        if background is None:
            out = np.clip(foreground * 255.0 + 0.5, 0, 255).astype(np.uint8)
        else:
            out = composite(foreground, alpha, background)
    return RenderedPhoto(out, alpha, background, shoulders_cut, mean_delta_e(crop, out, face))


def make_hd_copy(
    rgb: np.ndarray,
    low: LowResMatte,
    framing: Framing,
    spec: IdSpec,
    params: IdPhotoParams,
    colour: str,
    timings: Timings,
    background_image: np.ndarray | None = None,
) -> HdPhoto:
    """The same crop rendered at ``hd_size`` (the source's own detail, short side >= 600 px), with the same touch-ups
    and watermark (scaled), encoded at ``params.hd_dpi``, else at the DPI that keeps the physical size (600 px for
    295 px at 300 DPI: 610 DPI); no KB target."""
    hd_wh = hd_size((spec.width_px, spec.height_px), framing.scale)
    factor = hd_wh[0] / spec.width_px
    hd_timings = Timings()
    hd_framing = scale_framing(framing, factor, hd_wh)
    photo = render_photo(rgb, low, hd_framing, params, colour, hd_timings, background_image)
    with hd_timings.phase("encode_ms"):
        delivered = photo.rgb
        mark = params.watermark()
        if mark is not None:
            scaled = dataclasses.replace(
                mark, size_px=round(mark.size_px * factor), space_px=round(mark.space_px * factor)
            )
            delivered = draw_watermark(delivered, scaled).rgb
        dpi = params.hd_dpi if params.hd_dpi is not None else spec.dpi * factor
        encoded = encode_photo(delivered, params.format, dpi, alpha=photo.alpha_u8)
    timings.ms["hd_ms"] = sum(hd_timings.ms.values())
    return HdPhoto(encoded.data, hd_wh, round(dpi, 2))


def scale_framing(framing: Framing, factor: float, size_wh: tuple[int, int]) -> Framing:
    """The same crop on a ``factor`` times finer output grid of ``size_wh`` (pixel centres aligned)."""

    def point(xy) -> tuple[float, float]:
        return (xy[0] * factor + (factor - 1.0) / 2.0, xy[1] * factor + (factor - 1.0) / 2.0)

    eyes = np.asarray(framing.eyes_out, dtype=np.float64) * factor + (factor - 1.0) / 2.0
    return dataclasses.replace(
        framing,
        affine=scale_affine(framing.affine, factor),
        size_wh=size_wh,
        scale=framing.scale * factor,
        eyes_out=eyes,
        chin_out=point(framing.chin_out),
        crown_out=point(framing.crown_out),
    )
