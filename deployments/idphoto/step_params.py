"""The options of each ID-photo step (``/v1/idphoto/<step>``): a narrow parameter model per step, made from the
fields of :class:`IdPhotoParams` (same names, types, ranges, defaults and descriptions), so each step's OpenAPI text,
form and instruction vocabulary list only what the step reads. Values are still validated by ``IdPhotoParams`` (its
presets, colours and consistency checks: ``serve_app/jobs/idphoto_steps.py``), the one validation place."""

from __future__ import annotations

from pydantic import create_model

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
    "matte": ("matting",),
    "crop": (*_SIZE, *_LOOKS, "head_ratio", "top_ratio", "align", "lighting", "hd", "strict"),
    "background": ("background", "render", "spec", *_ENCODING),
    "watermark": (*_WATERMARK, *_ENCODING),
    "layout": _SHEET,
    "filesize": ("min_kb", "max_kb"),
}


def _step_model(step: str, fields: tuple[str, ...]) -> type[JobParams]:
    source = IdPhotoParams.model_fields
    return create_model(
        f"IdPhoto{step.capitalize()}Params",
        __base__=JobParams,
        __module__=__name__,
        __doc__=f"The options of the ID-photo {step} step (fields of IdPhotoParams).",
        **{name: (source[name].annotation, source[name]) for name in fields},
    )


STEP_PARAMS: dict[str, type[JobParams]] = {step: _step_model(step, fields) for step, fields in STEP_FIELDS.items()}
