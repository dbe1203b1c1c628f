"""One ID photo from one decoded portrait: segment, frame, warp, refine, relight, composite, encode, judge.

The face analyzer runs before this (its ``Face`` records are an input), so the same pipeline serves HTTP requests,
bucket events and the CLI. An expected failure is a value: a photo with the wrong number of faces still yields an
outcome whose report says ``fail``; only ``strict`` turns a failed report into :class:`NotCompliant`, and only a
photo with no face at all raises :class:`NoFaceFound` (there is nothing to crop).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from deployments.common.affine import eye_roll_deg
from deployments.common.errors import InternalError, NoFaceFound, NotCompliant
from deployments.common.image import require_image
from deployments.faces.types import Face
from deployments.idphoto.geometry import Framing, plan_framing
from deployments.idphoto.matte import MODNET_REFERENCE_PX, LowResMatte, Matting, keep_subject
from deployments.idphoto.output import EncodedPhoto, encode_photo, encode_sheet, plan_sheet, render_sheet
from deployments.idphoto.params import IdPhotoParams
from deployments.idphoto.render import HdPhoto, make_hd_copy, render_photo
from deployments.idphoto.render import timed as _timed
from deployments.idphoto.report import (
    MAX_BACKGROUND_STD,
    MAX_CENTRE_OFFSET,
    MAX_EDGE_PADDING,
    MAX_SOURCE_SCALE,
    MAX_TILT_DEG,
    MIN_SHARPNESS,
    Check,
    ComplianceReport,
    background_std,
    face_sharpness,
    measure_crown_y,
    ranged,
    reasons_for,
)
from deployments.idphoto.specs import IdSpec
from deployments.idphoto.touchup import look_notes, mirror_framing
from deployments.idphoto.watermark import draw_watermark

logger = logging.getLogger(__name__)

# A usable portrait's head fills at least a sixth of its height and the output's head about half of the output's, so
# three source pixels per output pixel (and MODNet's reference size) keep full quality.
SOURCE_PX_PER_OUTPUT_PX = 3


def source_min_side_px(spec: IdSpec) -> int:
    """The shortest source side a ``spec`` photo needs: a decoder may scale a bigger JPEG down to it (12 MP phone
    photos decode at half size for the common presets, several times faster)."""
    return max(MODNET_REFERENCE_PX, SOURCE_PX_PER_OUTPUT_PX * max(spec.width_px, spec.height_px))


class MatteSource(Protocol):
    """Anything that mattes a whole photo in a mode, e.g. :class:`deployments.idphoto.predictor.MattingPredictor`."""

    def segment(self, rgb: np.ndarray, matting: Matting) -> LowResMatte: ...


@dataclass(frozen=True, eq=False)
class IdPhotoOutcome:
    """The finished photo, the optional print sheet, the compliance report, where the time went, and the framing
    (the ``original -> output`` affine: where each output pixel came from)."""

    photo: bytes
    media_type: str
    sheet: bytes | None
    report: ComplianceReport
    timings_ms: dict[str, float]
    framing: Framing
    hd: HdPhoto | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "media_type": self.media_type,
            "photo_bytes": len(self.photo),
            "sheet_bytes": None if self.sheet is None else len(self.sheet),
            "hd": None if self.hd is None else self.hd.to_json(),
            "report": self.report.to_json(),
            "timings_ms": {k: round(v, 2) for k, v in self.timings_ms.items()},
        }


def make_id_photo(
    rgb: np.ndarray,
    faces: Sequence[Face],
    matte_source: MatteSource | LowResMatte,
    params: IdPhotoParams,
    specs: Mapping[str, IdSpec] | None = None,
) -> IdPhotoOutcome:
    """Build the ID photo for ``rgb`` (image contract: HxWx3 uint8 RGB) whose faces were found beforehand.

    ``matte_source`` is a matter (matting runs here, in ``params.matting`` mode) or a :class:`LowResMatte` computed
    in a batch earlier in that mode.
    """
    require_image(rgb)
    if not faces:
        raise NoFaceFound("no face found: an ID photo needs one face looking at the camera", details={"face_count": 0})
    timings: dict[str, float] = {}
    spec = params.resolve_spec(specs)
    colour = params.background_colour(spec)
    face = max(faces, key=lambda f: (f.box[2] - f.box[0]) * (f.box[3] - f.box[1]))
    size_wh = (spec.width_px, spec.height_px)

    with _timed(timings, "segment_ms"):
        low = matte_source if isinstance(matte_source, LowResMatte) else matte_source.segment(rgb, params.matting)
    if tuple(low.source_shape) != rgb.shape[:2]:
        raise InternalError(f"the matte was computed for a {low.source_shape} image, not {rgb.shape[:2]}")
    if low.matting != params.matting:
        raise InternalError(f"the matte was made in {low.matting} mode, the job asked for {params.matting}")
    with _timed(timings, "segment_ms"):
        low = keep_subject(low, tuple(np.asarray(face.landmarks[:2], dtype=np.float64).mean(axis=0)))
    with _timed(timings, "geometry_ms"):
        framing = plan_framing(face, low, spec, align=params.align)
        if params.horizontal_flip:
            framing = mirror_framing(framing)
    photo = render_photo(rgb, low, framing, params, colour, timings)
    mark = params.watermark()
    delivered, mark_font = photo.rgb, None
    if mark is not None:
        with _timed(timings, "watermark_ms"):
            marked = draw_watermark(photo.rgb, mark)
        delivered, mark_font = marked.rgb, marked.font
    with _timed(timings, "encode_ms"):
        encoded = encode_photo(
            delivered, params.format, spec.dpi, alpha=photo.alpha_u8, min_kb=params.min_kb, max_kb=params.max_kb
        )
    sheet = None
    canvas = params.sheet_canvas()
    if canvas is not None:
        with _timed(timings, "layout_ms"):
            plan = plan_sheet(canvas, size_wh, spec.dpi)
            sheet = encode_sheet(render_sheet(delivered, plan, cut_lines=params.cut_lines), params.format, canvas.dpi)
    hd = make_hd_copy(rgb, low, framing, spec, params, colour, timings) if params.hd else None
    with _timed(timings, "report_ms"):
        # Judged before the watermark: a watermarked photo is a proof, and its marks are not the background.
        report = judge_photo(
            photo.rgb, photo.alpha, photo.background, framing, face, len(faces), spec, encoded, params, mark_font
        )
    timings["total_ms"] = sum(timings.values())
    logger.debug("%s photo %s in %.1f ms: %s", spec.slug, report.verdict, timings["total_ms"], report.reasons)
    if params.strict and not report.compliant:
        raise NotCompliant(
            "the photo does not meet the " + spec.slug + " standard: " + "; ".join(report.reasons),
            details={"reasons": list(report.reasons), "report": report.to_json()},
        )
    return IdPhotoOutcome(encoded.data, encoded.media_type, sheet, report, timings, framing, hd)


def judge_photo(
    photo_rgb: np.ndarray,
    alpha: np.ndarray,
    background: np.ndarray | None,
    framing: Framing,
    face: Face,
    face_count: int,
    spec: IdSpec,
    encoded: EncodedPhoto,
    params: IdPhotoParams,
    watermark_font: str | None = None,
) -> ComplianceReport:
    """Measure the finished photo against ``spec`` and the house limits in :mod:`report`."""
    width_out, height_out = framing.size_wh
    eyes = framing.eyes_out
    centre_x = float((eyes[:, 0].mean() + framing.chin_out[0]) / 2.0)
    face_width_out = float(face.box[2] - face.box[0]) * framing.scale
    crown_y, crown_touches_top = measure_crown_y(alpha, centre_x, float(eyes[:, 1].mean()), face_width_out)
    checks: list[Check] = [
        Check("face_count", float(face_count), 1.0, 1.0, "faces", face_count == 1),
        ranged("head_height_ratio", (framing.chin_out[1] - crown_y) / height_out, *spec.head_height, "fraction"),
        ranged("top_margin_ratio", crown_y / height_out, *spec.top_margin, "fraction"),
        ranged("eye_tilt_deg", eye_roll_deg(eyes[0], eyes[1]), -MAX_TILT_DEG, MAX_TILT_DEG, "deg"),
        ranged(
            "horizontal_offset",
            (centre_x - width_out / 2.0) / width_out,
            -MAX_CENTRE_OFFSET,
            MAX_CENTRE_OFFSET,
            "fraction",
        ),
        ranged("sharpness", face_sharpness(photo_rgb, eyes, framing.chin_out), MIN_SHARPNESS, None, "laplacian_var"),
        ranged("source_scale", framing.scale, None, MAX_SOURCE_SCALE, "out_px_per_src_px"),
        ranged("edge_padding", framing.padding["top"] + framing.padding["bottom"], 0.0, MAX_EDGE_PADDING, "fraction"),
        Check("crown_visible", 0.0 if crown_touches_top else 1.0, 1.0, 1.0, "bool", not crown_touches_top),
        Check(
            "head_cropped_in_source",
            1.0 if framing.head_cropped_in_source else 0.0,
            0.0,
            0.0,
            "bool",
            not framing.head_cropped_in_source,
            message=f"the source photo cuts the head at its {' and '.join(_cut_edges(framing))} edge: "
            "an ID photo needs the whole head and hair with space around them (retake from further away)",
        ),
    ]
    if background is not None:
        checks.append(
            ranged(
                "background_uniformity",
                background_std(photo_rgb, background, alpha),
                0.0,
                MAX_BACKGROUND_STD,
                "rgb_rms",
            )
        )
    reasons = list(reasons_for(tuple(checks)))
    if face_count != 1:
        reasons.insert(0, f"{face_count} faces found; an ID photo needs exactly one (the largest was used)")
    if not encoded.size_ok:
        reasons.append(
            encoded.note or f"file size {encoded.size_kb:.1f} KB outside [{params.min_kb}, {params.max_kb}] KB"
        )
    return ComplianceReport(
        spec=spec.to_json(),
        face_count=face_count,
        checks=tuple(checks),
        reasons=tuple(reasons),
        notes=tuple(
            _notes(framing, encoded, params)
            + look_notes(params.touchups(), flipped=params.horizontal_flip, watermark_font=watermark_font)
        ),
        encoding=encoded.to_json(),
    )


def _notes(framing: Framing, encoded: EncodedPhoto, params: IdPhotoParams) -> list[str]:
    notes = []
    if framing.rotated:
        notes.append(f"eye line levelled (was {framing.roll_in_deg:+.1f} deg)")
    if framing.upsampled:
        notes.append(f"upsampled x{framing.scale:.2f}: the source has fewer pixels than the output needs")
    if framing.padding["total"] > 0:
        notes.append(f"{framing.padding['total']:.1%} of the photo lies beyond the source (its edge was extended)")
    if framing.crown_clipped:
        notes.append("the crop starts inside the source so the cut hair leaves the frame instead of ending in a line")
    if not framing.crown_from_matte:
        notes.append("crown estimated from face proportions (segmentation missed the head)")
    if params.lighting:
        notes.append("white balance and lighting evened out")
    if encoded.note and encoded.size_ok:
        notes.append(encoded.note)
    return notes


def _cut_edges(framing: Framing) -> list[str]:
    return (["top"] if framing.crown_clipped else []) + list(framing.cut_sides)
