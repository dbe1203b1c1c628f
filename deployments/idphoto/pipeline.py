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

from deployments.common.affine import apply_affine, eye_roll_deg
from deployments.common.errors import InternalError, NoFaceFound, NotCompliant
from deployments.common.image import require_image
from deployments.common.timings import Timings
from deployments.faces.types import Face
from deployments.idphoto.attire import AttireFit, default_attire_templates, dress
from deployments.idphoto.background import draw_backdrop
from deployments.idphoto.geometry import Framing, group_face, plan_framing
from deployments.idphoto.matte import MODNET_REFERENCE_PX, LowResMatte, Matting, keep_subject
from deployments.idphoto.output import EncodedPhoto, encode_photo, encode_sheet, plan_sheet, render_sheet
from deployments.idphoto.params import IdPhotoParams
from deployments.idphoto.parse import PortraitParse, parse_portrait
from deployments.idphoto.render import HdPhoto, make_hd_copy, render_photo
from deployments.idphoto.report import (
    MAX_BACKGROUND_STD,
    MAX_CENTRE_OFFSET,
    MAX_EDGE_PADDING,
    MAX_SOURCE_SCALE,
    MAX_TILT_DEG,
    MIN_SHARPNESS,
    Check,
    ComplianceReport,
    attire_checks,
    background_std,
    face_sharpness,
    measure_crown_y,
    ranged,
    reasons_for,
)
from deployments.idphoto.specs import IdSpec
from deployments.idphoto.steps import IDENTITY_AFFINE, matte_of_cut_out
from deployments.idphoto.texts import Lang, edges, say
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
    background_image: np.ndarray | None = None,
) -> IdPhotoOutcome:
    """Build the ID photo for ``rgb`` (image contract: HxWx3 uint8 RGB) whose faces were found beforehand.

    ``matte_source`` is a matter (matting runs here, in ``params.matting`` mode) or a :class:`LowResMatte` computed
    in a batch earlier in that mode. ``background_image`` (HxWx3 uint8 RGB; else the ``params.background_image``
    backdrop), when given, replaces the background colour: it is scaled to cover the photo and centre-cropped.
    """
    subject = prepare_subject(rgb, faces, matte_source, params, specs)
    return frame_id_photo(subject, params, specs, background_image)


@dataclass(frozen=True, eq=False)
class Subject:
    """The photo ready to frame: the people used (largest first) and how many faces were found, their matte, the
    photo in their new clothes when asked (``attire``: where they went), and the time spent so far."""

    rgb: np.ndarray
    low: LowResMatte
    people: Sequence[Face]
    face_count: int
    attire: Attired | None
    timings: Timings


def prepare_subject(
    rgb: np.ndarray,
    faces: Sequence[Face],
    matte_source: MatteSource | LowResMatte,
    params: IdPhotoParams,
    specs: Mapping[str, IdSpec] | None = None,
) -> Subject:
    """The people, their matte and the template attire (tier 0): everything before the framing, which a job may
    carry on from (generated clothes redraw ``Subject.rgb`` before :func:`frame_id_photo`)."""
    require_image(rgb)
    if not faces:
        raise NoFaceFound("no face found: an ID photo needs one face looking at the camera", details={"face_count": 0})
    timings = Timings()
    spec = params.resolve_spec(specs)
    people = sorted(faces, key=lambda f: (f.box[2] - f.box[0]) * (f.box[3] - f.box[1]), reverse=True)[: spec.faces]

    with timings.phase("segment_ms"):
        low = matte_source if isinstance(matte_source, LowResMatte) else matte_source.segment(rgb, params.matting)
    if tuple(low.source_shape) != rgb.shape[:2]:
        raise InternalError(f"the matte was computed for a {low.source_shape} image, not {rgb.shape[:2]}")
    if low.matting != params.matting:
        raise InternalError(f"the matte was made in {low.matting} mode, the job asked for {params.matting}")
    with timings.phase("segment_ms"):
        low = keep_subject(low, _person_points(people), min(float(f.box[2] - f.box[0]) for f in people))
    attire: Attired | None = None
    if params.attire != "none":  # before the framing: the shoulders need the uncropped person
        with timings.phase("attire_ms"):
            rgb, low, attire = _dressed(rgb, low, people, params)
    return Subject(rgb, low, people, len(faces), attire, timings)


def frame_id_photo(
    subject: Subject,
    params: IdPhotoParams,
    specs: Mapping[str, IdSpec] | None = None,
    background_image: np.ndarray | None = None,
) -> IdPhotoOutcome:
    """Frame, composite, encode, lay out and judge the prepared ``subject`` (:func:`make_id_photo`'s second half)."""
    rgb, low, people, timings = subject.rgb, subject.low, subject.people, subject.timings
    spec = params.resolve_spec(specs)
    colour = params.background_colour(spec)
    size_wh = (spec.width_px, spec.height_px)
    with timings.phase("geometry_ms"):
        framing = plan_framing(group_face(people), low, spec, align=params.align)
        if params.horizontal_flip:
            framing = mirror_framing(framing)
    if background_image is None and params.background_image is not None:
        background_image = draw_backdrop(params.background_image)
    photo = render_photo(rgb, low, framing, params, colour, timings, background_image)
    mark = params.watermark()
    delivered, mark_note = photo.rgb, None
    if mark is not None:
        with timings.phase("watermark_ms"):
            marked = draw_watermark(photo.rgb, mark)
        delivered, mark_note = marked.rgb, marked.note
    with timings.phase("encode_ms"):
        encoded = encode_photo(
            delivered, params.format, spec.dpi, alpha=photo.alpha_u8, min_kb=params.min_kb, max_kb=params.max_kb
        )
    sheet = None
    canvas = params.sheet_canvas()
    if canvas is not None:
        with timings.phase("layout_ms"):
            plan = plan_sheet(canvas, size_wh, spec.dpi)
            sheet = encode_sheet(render_sheet(delivered, plan, cut_lines=params.cut_lines), params.format, canvas.dpi)
    hd = make_hd_copy(rgb, low, framing, spec, params, colour, timings, background_image) if params.hd else None
    with timings.phase("report_ms"):
        # Judged before the watermark: a watermarked photo is a proof, and its marks are not the background.
        found = Found(people, subject.face_count, photo.shoulders_cut, photo.skin_delta_e, subject.attire)
        report = judge_photo(photo.rgb, photo.alpha, photo.background, framing, found, spec, encoded, params, mark_note)
    timings.ms["total_ms"] = sum(timings.ms.values())
    logger.debug("%s photo %s in %.1f ms: %s", spec.slug, report.verdict, timings.ms["total_ms"], report.reasons)
    if params.strict and not report.compliant:
        raise NotCompliant(
            "the photo does not meet the " + spec.slug + " standard: " + "; ".join(report.reasons),
            details={"reasons": list(report.reasons), "report": report.to_json()},
        )
    return IdPhotoOutcome(encoded.data, encoded.media_type, sheet, report, timings.ms, framing, hd)


@dataclass(frozen=True, eq=False)
class Attired:
    """Where the new clothes went (one fit per person) and the source's parse, for the report's seam check."""

    fits: tuple[AttireFit, ...]
    parse: PortraitParse


def _dressed(
    rgb: np.ndarray, low: LowResMatte, people: Sequence[Face], params: IdPhotoParams
) -> tuple[np.ndarray, LowResMatte, Attired]:
    """The people in ``params.attire`` (tier 0: ``deployments/idphoto/attire.py``), their hair on the shoulders
    kept in front (the photo's parse), and the matte of the person and the clothes together (a cut-out's matte: only
    resampled from here on, as the matte step's output is)."""
    template = default_attire_templates()[params.attire]
    height, width = rgb.shape[:2]
    alpha = matte_u8(low, (width, height), rgb)
    parse = parse_portrait(rgb, alpha, people)
    fits = []
    for person in people:
        dressed = dress(rgb, alpha, person, template, params.attire_color, mesh=person.mesh, parse=parse)
        rgb, alpha = dressed.rgb, dressed.alpha
        fits.append(dressed.fit)
    return rgb, matte_of_cut_out(alpha), Attired(tuple(fits), parse)


def matte_u8(low: LowResMatte, size_wh: tuple[int, int], rgb: np.ndarray) -> np.ndarray:
    """The person's matte at the photo's own size, HxW uint8."""
    return np.clip(np.rint(low.matte_at(IDENTITY_AFFINE, size_wh, rgb) * 255.0), 0, 255).astype(np.uint8)


@dataclass(frozen=True, eq=False)
class Found:
    """What the photo holds: the people used (largest first), how many faces were found, whether the source cuts
    the shoulders, how far the face colour moved (mean CIELAB ΔE), and where new clothes went (``attire``)."""

    people: Sequence[Face]
    face_count: int
    shoulders_cut: bool
    skin_delta_e: float | None
    attire: Attired | None = None


def judge_photo(
    photo_rgb: np.ndarray,
    alpha: np.ndarray,
    background: np.ndarray | None,
    framing: Framing,
    found: Found,
    spec: IdSpec,
    encoded: EncodedPhoto,
    params: IdPhotoParams,
    watermark_note: str | None = None,
) -> ComplianceReport:
    """Measure the finished photo against ``spec`` and the house limits in :mod:`report`."""
    lang = params.lang
    measured = _measure(photo_rgb, alpha, framing, found)
    checks = _framing_checks(measured, framing, found, spec) + _source_checks(measured, framing, found, lang)
    if background is not None:
        std = background_std(photo_rgb, background, alpha)
        checks.append(ranged("background_uniformity", std, 0.0, MAX_BACKGROUND_STD, "rgb_rms"))
    if found.attire is not None:
        attire = found.attire
        checks += attire_checks(attire.fits, attire.parse.labels, framing.affine, framing.size_wh, lang)
    reasons, codes = _reasons(checks, found, spec, encoded, params)
    looks = look_notes(params.touchups(), flipped=params.horizontal_flip, watermark_note=watermark_note, lang=lang)
    return ComplianceReport(
        spec=spec.to_json(),
        face_count=found.face_count,
        checks=tuple(checks),
        reasons=tuple(reasons),
        notes=tuple(_notes(framing, params) + looks),
        encoding=encoded.to_json(),
        reason_codes=tuple(codes),
        advice=tuple(_advice(codes, spec, lang)),
        lang=lang,
        skin_delta_e=found.skin_delta_e,
    )


@dataclass(frozen=True)
class _Measured:
    """What the checks read off the finished photo: the face's centre line, the crown (and whether the matte runs
    into the top edge there) and each used face's sharpness (None where it cannot be measured)."""

    centre_x: float
    crown_y: float
    crown_touches_top: bool
    sharpness: list[float | None]


def _measure(photo_rgb: np.ndarray, alpha: np.ndarray, framing: Framing, found: Found) -> _Measured:
    eyes = framing.eyes_out
    centre_x = float((eyes[:, 0].mean() + framing.chin_out[0]) / 2.0)
    group = group_face(found.people)  # the crown is searched across every head, as the framing did
    face_width_out = float(group.box[2] - group.box[0]) * framing.scale
    crown_y, crown_touches_top = measure_crown_y(alpha, centre_x, float(eyes[:, 1].mean()), face_width_out)
    sharpness = [face_sharpness(photo_rgb, *_face_points_out(framing, f)) for f in found.people]
    return _Measured(centre_x, crown_y, crown_touches_top, sharpness)


def _framing_checks(measured: _Measured, framing: Framing, found: Found, spec: IdSpec) -> list[Check]:
    """The face count, and where and how large the head sits: the standard's ranges and the house limits."""
    width_out, height_out = framing.size_wh
    eyes, crown_y, sharpness = framing.eyes_out, measured.crown_y, measured.sharpness
    return [
        Check("face_count", float(found.face_count), spec.faces, spec.faces, "faces", found.face_count == spec.faces),
        ranged("head_height_ratio", (framing.chin_out[1] - crown_y) / height_out, *spec.head_height, "fraction"),
        ranged("top_margin_ratio", crown_y / height_out, *spec.top_margin, "fraction"),
        ranged("eye_tilt_deg", eye_roll_deg(eyes[0], eyes[1]), -MAX_TILT_DEG, MAX_TILT_DEG, "deg"),
        ranged(
            "horizontal_offset",
            (measured.centre_x - width_out / 2.0) / width_out,
            -MAX_CENTRE_OFFSET,
            MAX_CENTRE_OFFSET,
            "fraction",
        ),
        ranged("sharpness", None if None in sharpness else min(sharpness), MIN_SHARPNESS, None, "laplacian_var"),
        ranged("source_scale", framing.scale, None, MAX_SOURCE_SCALE, "out_px_per_src_px"),
        ranged("edge_padding", framing.padding["top"] + framing.padding["bottom"], 0.0, MAX_EDGE_PADDING, "fraction"),
    ]


def _source_checks(measured: _Measured, framing: Framing, found: Found, lang: Lang) -> list[Check]:
    """What the source photo lacks: the crown, the head inside the frame, the shoulders."""
    touches, cut_edges = measured.crown_touches_top, _cut_edges(framing)
    crown = Check(
        "crown_visible", 0.0 if touches else 1.0, 1.0, 1.0, "bool", not touches, message=say(lang, "crown_visible")
    )
    head = Check(
        "head_cropped_in_source",
        1.0 if cut_edges else 0.0,
        0.0,
        0.0,
        "bool",
        not cut_edges,
        message=say(lang, "head_cropped_in_source", edges=edges(lang, cut_edges)),
    )
    cut = found.shoulders_cut
    message = say(lang, "shoulders_cropped_in_source")
    shoulders = Check("shoulders_cropped_in_source", 1.0 if cut else 0.0, 0.0, 0.0, "bool", not cut, message=message)
    return [crown, head, shoulders]


def _reasons(
    checks: list[Check], found: Found, spec: IdSpec, encoded: EncodedPhoto, params: IdPhotoParams
) -> tuple[list[str], list[str]]:
    """The reasons a person reads and their codes: one per failed check (the face count's names what was used),
    and the file size when the encoding missed its KB range."""
    lang = params.lang
    failed = [c for c in checks if not c.passed]
    reasons = list(reasons_for(tuple(failed), lang))
    codes = [c.name for c in failed]
    if found.face_count != spec.faces:
        reasons[codes.index("face_count")] = say(
            lang, "face_count", count=found.face_count, needed=spec.faces, used=len(found.people)
        )
    if not encoded.size_ok:
        sizes = {"size_kb": f"{encoded.size_kb:.1f}", "min_kb": params.min_kb or "", "max_kb": params.max_kb or ""}
        reasons.append(say(lang, "file_size", **sizes))
        codes.append("file_size")
    return reasons, codes


def _advice(codes: list[str], spec: IdSpec, lang: Lang) -> list[str]:
    advice = []
    if "head_cropped_in_source" in codes or "crown_visible" in codes:
        advice.append(say(lang, "advice_retake_head"))
    if "shoulders_cropped_in_source" in codes:
        advice.append(say(lang, "advice_retake_shoulders"))
    if "face_count" in codes:
        advice.append(say(lang, "advice_faces", needed=spec.faces))
    if "attire_seam_gap" in codes or "attire_covers_chin" in codes:
        advice.append(say(lang, "advice_attire"))
    return advice


def _notes(framing: Framing, params: IdPhotoParams) -> list[str]:
    lang = params.lang
    notes = []
    if framing.rotated:
        notes.append(say(lang, "note_rotated", deg=f"{framing.roll_in_deg:+.1f}"))
    if framing.upsampled:
        notes.append(say(lang, "note_upsampled", scale=f"{framing.scale:.2f}"))
    if framing.padding["total"] > 0:
        notes.append(say(lang, "note_beyond_source", share=f"{framing.padding['total']:.1%}"))
    if framing.crown_clipped:
        notes.append(say(lang, "note_crown_clipped"))
    if not framing.crown_from_matte:
        notes.append(say(lang, "note_crown_estimated"))
    if params.lighting != "off":
        notes.append(say(lang, f"note_lighting_{params.lighting}"))
    return notes


def _person_points(people: Sequence[Face]) -> list[tuple[float, float]]:
    """A point on each person's face (between the eyes) and one on the chest (half a face width below the chin)."""
    points = []
    for face in people:
        eye_mid = np.asarray(face.landmarks[:2], dtype=np.float64).mean(axis=0)
        points += [
            (float(eye_mid[0]), float(eye_mid[1])),
            (face.chin[0], face.chin[1] + 0.5 * (face.box[2] - face.box[0])),
        ]
    return points


def _face_points_out(framing: Framing, face: Face) -> tuple[np.ndarray, tuple[float, float]]:
    """A face's eyes and chin in output pixels."""
    eyes = apply_affine(framing.affine, np.asarray(face.landmarks[:2], dtype=np.float64))
    chin = apply_affine(framing.affine, np.array([face.chin], dtype=np.float64))[0]
    return eyes, (float(chin[0]), float(chin[1]))


def _cut_edges(framing: Framing) -> list[str]:
    return (["top"] if framing.crown_clipped else []) + list(framing.cut_sides)
