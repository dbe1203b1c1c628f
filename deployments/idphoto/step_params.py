"""The options of each ID-photo step (``/v1/idphoto/<step>``): a narrow parameter model per step, made from the
fields of :class:`IdPhotoParams` (same names, types, ranges, defaults and descriptions; ``STEP_DESCRIPTIONS`` where a
step reads a field more narrowly, e.g. ``dpi`` as the DPI written in its file), so each step's OpenAPI text, form and
instruction vocabulary list only what the step reads. Values are still validated by ``IdPhotoParams`` (its
presets, colours and consistency checks: ``serve_app/jobs/idphoto_steps.py``), the one validation place."""

from __future__ import annotations

import copy

from pydantic import create_model
from pydantic.fields import FieldInfo

from deployments.common.params import JobParams
from deployments.idphoto.params import IdPhotoParams

_SIZE = ("spec", "width_px", "height_px", "width_mm", "height_mm", "dpi")
_LOOKS = (
    "whitening_strength",
    "brightness_strength",
    "contrast_strength",
    "saturation_strength",
    "sharpen_strength",
    "horizontal_flip",
)
_ENCODING = ("format", "min_kb", "max_kb")
_WATERMARK = tuple(f"watermark_{name}" for name in ("text", "size", "opacity", "angle", "color", "space"))
_SHEET = ("layout", "canvas_width_mm", "canvas_height_mm", "canvas_dpi", "gap_mm", "cut_lines", "format", "dpi")

STEP_FIELDS: dict[str, tuple[str, ...]] = {
    "matte": ("matting", "dpi"),
    "crop": (*_SIZE, *_LOOKS, "head_ratio", "top_ratio", "align", "lighting", "hd", "hd_dpi", "strict"),
    "background": ("background", "render", "spec", *_ENCODING, "dpi"),
    "watermark": (*_WATERMARK, *_ENCODING, "dpi"),
    "layout": (*_SHEET, "width_px", "height_px", "min_kb", "max_kb"),
    "filesize": ("min_kb", "max_kb", "dpi"),
}
_WRITTEN_DPI = "the DPI written in the file; default the source's own (300 when it has none)"
_FITTED = "the photo resized to width_px x height_px before it is laid out; default its own size"
# What a field means in a step where it means something narrower than in /v1/idphoto.
STEP_DESCRIPTIONS: dict[tuple[str, str], str] = {
    **{(step, "dpi"): _WRITTEN_DPI for step in ("matte", "background", "watermark", "filesize")},
    ("layout", "dpi"): "the photo's DPI, which sets its physical size on the sheet; default its own (300 without)",
    ("layout", "width_px"): _FITTED,
    ("layout", "height_px"): _FITTED,
    ("layout", "min_kb"): "the sheet as a JPEG of at least min_kb KB",
    ("layout", "max_kb"): "the sheet as a JPEG of at most max_kb KB",
}


def _field(step: str, name: str) -> FieldInfo:
    field = IdPhotoParams.model_fields[name]
    description = STEP_DESCRIPTIONS.get((step, name))
    if description is None:
        return field
    described = copy.copy(field)
    described.description = description
    return described


def _step_model(step: str, fields: tuple[str, ...]) -> type[JobParams]:
    source = IdPhotoParams.model_fields
    return create_model(
        f"IdPhoto{step.capitalize()}Params",
        __base__=JobParams,
        __module__=__name__,
        __doc__=f"The options of the ID-photo {step} step (fields of IdPhotoParams).",
        **{name: (source[name].annotation, _field(step, name)) for name in fields},
    )


STEP_PARAMS: dict[str, type[JobParams]] = {step: _step_model(step, fields) for step, fields in STEP_FIELDS.items()}
