"""The one validation place for an ID-photo job: HTTP form/JSON, bucket metadata and the CLI all build this model.

Unknown keys are refused (a typo must not silently fall back to a default), and options that contradict each other
are refused with a message naming both. The preset slug is checked against the specs passed as validation context
(``IdPhotoParams.model_validate(data, context={"specs": specs})``) or, without one, against the shipped presets.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from deployments.common.admission import IDPHOTO_OUTPUT
from deployments.common.errors import InternalError, InvalidParameter
from deployments.common.params import JobParams
from deployments.common.params import parse_params as parse_job_params
from deployments.idphoto.attire import default_attire_templates
from deployments.idphoto.background import Backdrop
from deployments.idphoto.lighting import Lighting
from deployments.idphoto.matte import DEFAULT_MATTING, Matting
from deployments.idphoto.output import (
    HD_MIN_SHORT_SIDE_PX,
    PRESET_SHEETS,
    SHEET_DPI,
    SHEET_OUTPUT,
    SheetCanvas,
    custom_canvas,
    hd_size,
)
from deployments.idphoto.specs import IdSpec, custom_spec, default_specs, mm_to_px
from deployments.idphoto.texts import DEFAULT_LANG, Lang
from deployments.idphoto.touchup import Touchups
from deployments.idphoto.watermark import Watermark

NAMED_COLOURS: dict[str, str] = {
    "white": "#ffffff",
    "blue": "#628bce",
    "red": "#d74532",
    "black": "#000000",
    "dark-blue": "#4b6190",
    "light-gray": "#f2f0f0",
}
TRANSPARENT = "transparent"
DEFAULT_SPEC = "cn-1inch"
_HEX = re.compile(r"^#?([0-9a-fA-F]{6}|[0-9a-fA-F]{3})$")


def parse_colour(value: str) -> str:
    """A named colour, ``#rgb``/``#rrggbb`` (``#`` optional) or ``transparent`` -> ``#rrggbb``/``transparent``."""
    text = value.strip().lower()
    if text == TRANSPARENT:
        return TRANSPARENT
    if text in NAMED_COLOURS:
        return NAMED_COLOURS[text]
    match = _HEX.match(text)
    if not match:
        raise ValueError(
            f"background {value!r} is not a colour: use {', '.join(NAMED_COLOURS)}, transparent, or hex like #628bce"
        )
    digits = match.group(1)
    if len(digits) == 3:
        digits = "".join(c * 2 for c in digits)
    return f"#{digits}"


def hex_to_rgb(colour: str) -> tuple[int, int, int]:
    digits = colour.lstrip("#")
    return (int(digits[0:2], 16), int(digits[2:4], 16), int(digits[4:6], 16))


class IdPhotoParams(JobParams):
    """What the caller asks for. ``background=None`` means the preset's own colour."""

    spec: str | None = Field(default=None, description="preset slug, e.g. cn-1inch; default cn-1inch")
    width_px: int | None = Field(default=None, ge=32, le=4000)
    height_px: int | None = Field(default=None, ge=32, le=4000)
    width_mm: float | None = Field(default=None, gt=5, le=300)
    height_mm: float | None = Field(default=None, gt=5, le=300)
    dpi: float = Field(default=300.0, ge=72, le=1200)
    head_ratio: float | None = Field(default=None, ge=0.2, le=0.9, description="target crown-to-chin / height")
    top_ratio: float | None = Field(default=None, ge=0.0, le=0.4, description="target top-edge-to-crown / height")
    background: str | None = None
    background_image: Backdrop | None = Field(
        default=None, description="a studio backdrop behind the person instead of a colour"
    )
    render: Literal["solid", "vertical", "radial"] = "solid"
    format: Literal["jpeg", "png"] = "jpeg"
    min_kb: int | None = Field(default=None, ge=1, le=20000)
    max_kb: int | None = Field(default=None, ge=1, le=20000)
    layout: Literal["none", "6inch", "5inch", "a4", "3r", "4r", "custom"] = "none"
    canvas_width_mm: float | None = Field(default=None, ge=25, le=600, description="layout=custom: the sheet's width")
    canvas_height_mm: float | None = Field(default=None, ge=25, le=600, description="layout=custom: its height")
    canvas_dpi: float = Field(default=SHEET_DPI, ge=72, le=600, description="layout=custom: the sheet's DPI")
    gap_mm: float | None = Field(default=None, ge=0, le=50, description="layout=custom: space between copies")
    cut_lines: bool = False
    lighting: Lighting = Field(
        default="gentle",
        description="gentle: exposure only, skin keeps its colour; full: white balance + CLAHE (colder skin); off. "
        "true means gentle, false off",
    )
    align: bool = Field(default=True, description="level a tilted eye line before cropping")
    strict: bool = False
    matting: Matting = Field(
        default=DEFAULT_MATTING, description="modnet: MODNet matting, hair strands kept; selfie: fast, coarser edges"
    )
    attire: str = Field(
        default="none",
        description="formal clothes over the person's own (换正装): none, or a template of GET /v1/idphoto/attire "
        "(suit-tie, suit, women-suit, white-shirt, blouse, school-uniform, or one of configs/attire/); the face, hair "
        "and neck stay the person's own pixels",
    )
    attire_color: str | None = Field(default=None, description="one of the template's colours; default: its first")
    attire_engine: Literal["template", "generative"] = Field(
        default="template",
        description="template: the drawn clothes (CPU, milliseconds); generative: the drawn clothes redrawn as real "
        "cloth by the Renderer (GPU; `portrait models pull --group generative`), the face and hair untouched",
    )
    # Touch-ups of the person only (HivisionIDPhotos' names and ranges; see deployments/idphoto/touchup.py).
    whitening_strength: float = Field(default=0.0, ge=0, le=30)
    brightness_strength: float = Field(default=0.0, ge=-50, le=50)
    contrast_strength: float = Field(default=0.0, ge=-100, le=100)
    saturation_strength: float = Field(default=0.0, ge=-100, le=100)
    sharpen_strength: float = Field(default=0.0, ge=0, le=5)
    horizontal_flip: bool = False
    hd: bool = Field(default=False, description="also an HD copy at the spec's aspect ratio, short side >= 600 px")
    hd_dpi: float | None = Field(
        default=None,
        ge=72,
        le=1200,
        description="the DPI written in the HD copy; default the DPI that keeps the photo's physical size",
    )
    watermark_text: str | None = Field(default=None, min_length=1, max_length=64)
    watermark_size: int = Field(default=20, ge=8, le=200, description="font size in output pixels")
    watermark_opacity: float = Field(default=0.5, ge=0, le=1)
    watermark_angle: float = Field(default=30.0, ge=-360, le=360, description="degrees, counter-clockwise")
    watermark_color: str = "#000000"
    watermark_space: int = Field(default=25, ge=0, le=500, description="pixels between repeats")

    @field_validator("spec")
    @classmethod
    def _known_spec(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        slug = value.strip().lower()
        specs = _specs_from(info.context)
        if slug not in specs:
            raise ValueError(f"unknown spec {value!r}; known presets: {', '.join(sorted(specs))}")
        return slug

    lang: Lang = Field(default=DEFAULT_LANG, description="language of the report's texts: en or zh (zh-CN...)")

    @field_validator("lighting", mode="before")
    @classmethod
    def _lighting(cls, value: Any) -> Any:
        """``true``/``false`` (what the field used to take, also as form text) mean ``gentle``/``off``."""
        text = str(value).strip().lower()
        return {"true": "gentle", "1": "gentle", "yes": "gentle", "false": "off", "0": "off", "no": "off"}.get(
            text, value
        )

    @field_validator("lang", mode="before")
    @classmethod
    def _lang(cls, value: Any) -> Any:
        """``zh-CN``, ``zh_Hans``, ``en-US``... name their language by the first part."""
        return re.split(r"[-_]", value.strip().lower())[0] if isinstance(value, str) else value

    @field_validator("background")
    @classmethod
    def _colour(cls, value: str | None) -> str | None:
        return None if value is None else parse_colour(value)

    @field_validator("watermark_color")
    @classmethod
    def _opaque_colour(cls, value: str) -> str:
        colour = parse_colour(value)
        if colour == TRANSPARENT:
            raise ValueError("a watermark needs a colour; lower watermark_opacity to make it fainter")
        return colour

    @field_validator("attire")
    @classmethod
    def _known_attire(cls, value: str) -> str:
        templates = default_attire_templates()
        if value != "none" and value not in templates:
            raise ValueError(f"unknown attire {value!r}; attire: none, {', '.join(templates)}")
        return value

    @model_validator(mode="after")
    def _attire_colour(self) -> IdPhotoParams:
        if self.attire_engine != "template" and self.attire == "none":
            raise ValueError("attire_engine goes with an attire: name one (GET /v1/idphoto/attire)")
        if self.attire_color is None:
            return self
        if self.attire == "none":
            raise ValueError("attire_color goes with an attire: name one (GET /v1/idphoto/attire)")
        colours = default_attire_templates()[self.attire].colours
        if self.attire_color not in colours:
            offered = ", ".join(colours) or "none (the template is used as drawn)"
            raise ValueError(f"attire_color of {self.attire} is one of: {offered}")
        return self

    @model_validator(mode="after")
    def _consistent(self) -> IdPhotoParams:
        px = (self.width_px, self.height_px)
        mm = (self.width_mm, self.height_mm)
        if (px[0] is None) != (px[1] is None):
            raise ValueError("width_px and height_px go together: give both or neither")
        if (mm[0] is None) != (mm[1] is None):
            raise ValueError("width_mm and height_mm go together: give both or neither")
        if px[0] is not None and mm[0] is not None:
            raise ValueError("give the custom size in pixels or in millimetres, not both")
        if self.spec is not None and (px[0] is not None or mm[0] is not None):
            raise ValueError("spec and a custom size (width_px/height_px or width_mm/height_mm) exclude each other")
        if self.spec is not None and self._asked("dpi"):
            raise ValueError("dpi applies to a custom size; a preset carries its own DPI")
        if mm[0] is not None:
            px = (mm_to_px(mm[0], self.dpi), mm_to_px(mm[1], self.dpi))
        too_large = IDPHOTO_OUTPUT.problem(*px) if px[0] is not None else None
        if too_large is not None:
            raise ValueError(f"{too_large}: ask for fewer millimetres, a lower dpi or fewer pixels")
        hd_too_large = IDPHOTO_OUTPUT.problem(*hd_size(px, 1.0)) if px[0] is not None and self.hd else None
        if hd_too_large is not None:
            raise ValueError(f"hd: the HD copy (short side {HD_MIN_SHORT_SIDE_PX} px) would be {hd_too_large}")
        if self.hd_dpi is not None and not self.hd:
            raise ValueError("hd_dpi is the HD copy's DPI: it needs hd=true")
        if self.background_image is not None and self.background is not None:
            raise ValueError("background and background_image exclude each other: a colour or a backdrop")
        if self.background_image is not None and self.render != "solid":
            raise ValueError(f"render={self.render} shades a colour background, not background_image")
        if self.background == TRANSPARENT:
            if self.format != "png":
                raise ValueError("background=transparent needs format=png (JPEG has no alpha channel)")
            if self.render != "solid":
                raise ValueError(f"render={self.render} needs a colour background, not transparent")
            if self.layout != "none":
                raise ValueError("a print layout needs an opaque background, not transparent")
        if (self.min_kb is not None or self.max_kb is not None) and self.format != "jpeg":
            raise ValueError(
                "min_kb/max_kb apply to format=jpeg only (PNG is lossless and cannot trade quality for size)"
            )
        if self.min_kb is not None and self.max_kb is not None and self.min_kb > self.max_kb:
            raise ValueError(f"min_kb ({self.min_kb}) must not exceed max_kb ({self.max_kb})")
        if self.cut_lines and self.layout == "none":
            raise ValueError("cut_lines needs a layout (6inch, 5inch, a4, 3r, 4r or custom)")
        self._consistent_canvas()
        return self

    def _consistent_canvas(self) -> None:
        canvas = (self.canvas_width_mm, self.canvas_height_mm)
        custom_fields = [
            name for name in ("canvas_dpi", "canvas_height_mm", "canvas_width_mm", "gap_mm") if self._asked(name)
        ]
        if self.layout != "custom":
            if custom_fields:
                raise ValueError(f"{', '.join(custom_fields)} apply to layout=custom only")
            return
        if canvas[0] is None or canvas[1] is None:
            raise ValueError("layout=custom needs canvas_width_mm and canvas_height_mm")
        width_px, height_px = mm_to_px(canvas[0], self.canvas_dpi), mm_to_px(canvas[1], self.canvas_dpi)
        too_large = SHEET_OUTPUT.problem(width_px, height_px)
        if too_large is not None:
            raise ValueError(f"{too_large}: ask for a smaller canvas or a lower canvas_dpi")

    def _asked(self, name: str) -> bool:
        """Whether the caller set ``name`` to something other than its default: only then is it refused beside an
        option that excludes it, so the model's own dump (defaults included, as records and ``meta.params`` hold it)
        validates again, as a language model's answer that spells out defaults does."""
        return name in self.model_fields_set and getattr(self, name) != type(self).model_fields[name].default

    def touchups(self) -> Touchups:
        return Touchups(
            whitening_strength=self.whitening_strength,
            brightness_strength=self.brightness_strength,
            contrast_strength=self.contrast_strength,
            saturation_strength=self.saturation_strength,
            sharpen_strength=self.sharpen_strength,
        )

    def sheet_canvas(self) -> SheetCanvas | None:
        """The print sheet asked for, or None (``layout=none``)."""
        if self.layout == "none":
            return None
        if self.layout != "custom":
            return PRESET_SHEETS[self.layout]
        return custom_canvas(self.canvas_width_mm, self.canvas_height_mm, self.canvas_dpi, self.gap_mm)

    def watermark(self) -> Watermark | None:
        if self.watermark_text is None:
            return None
        return Watermark(
            text=self.watermark_text,
            size_px=self.watermark_size,
            opacity=self.watermark_opacity,
            angle_deg=self.watermark_angle,
            colour_rgb=hex_to_rgb(self.watermark_color),
            space_px=self.watermark_space,
        )

    def resolve_spec(self, specs: Mapping[str, IdSpec] | None = None) -> IdSpec:
        """The preset, or a custom spec; ``head_ratio``/``top_ratio`` narrow its ranges to ±0.02 around the target."""
        specs = specs if specs is not None else default_specs()
        if self.width_px is not None or self.width_mm is not None:
            base = custom_spec(
                width_px=self.width_px,
                height_px=self.height_px,
                width_mm=self.width_mm,
                height_mm=self.height_mm,
                dpi=self.dpi,
            )
        else:
            slug = self.spec or DEFAULT_SPEC
            if slug not in specs:
                # The validator checked the slug against the specs it was given: these are other specs (our bug).
                raise InternalError(f"spec {slug!r} passed validation but is not among {sorted(specs)}")
            base = specs[slug]
        head = _around(self.head_ratio) if self.head_ratio is not None else base.head_height
        top = _around(self.top_ratio) if self.top_ratio is not None else base.top_margin
        if head[0] + top[0] >= 0.98:
            raise InvalidParameter(f"head_ratio {head} plus top_ratio {top} leave no room for the chin")
        return dataclasses.replace(base, head_height=head, top_margin=top)

    def background_colour(self, spec: IdSpec) -> str:
        """``#rrggbb`` or ``transparent``: the caller's choice, else the preset's."""
        return self.background if self.background is not None else parse_colour(spec.background)


def _around(target: float) -> tuple[float, float]:
    return (round(max(0.0, target - 0.02), 4), round(min(0.99, target + 0.02), 4))


def _specs_from(context: Any) -> Mapping[str, IdSpec]:
    if isinstance(context, Mapping) and "specs" in context:
        return context["specs"]
    return default_specs()


def parse_params(data: Mapping[str, Any], specs: Mapping[str, IdSpec] | None = None) -> IdPhotoParams:
    """Validate raw options against ``specs`` (default: the shipped presets) into one :class:`InvalidParameter`."""
    return parse_job_params(IdPhotoParams, data, context={"specs": specs or default_specs()})
