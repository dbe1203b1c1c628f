"""HivisionIDPhotos' wire format (its ``deploy_api.py``), mapped onto ours: field names, defaults, value conventions,
model names and answers. No Ray, no images: each of its endpoints is one job of our registry (``ENDPOINTS``: its form
-> that job's options -> ``run_job`` in ``routes/hivision.py`` -> its JSON keys), so its calls are counted, checked
and answered as ``/v1/<job>`` calls are.

Its server saves every image of ``/idphoto`` and ``/idphoto_crop`` at the request's ``dpi``, HD copy included; so do
these endpoints (``hd_dpi``), while ``/v1/idphoto`` writes its HD copy at the DPI that keeps the physical size.

Where its documentation and its code disagree the code wins, since its clients were written against its server: the
alignment field read is ``face_align`` (the documented ``face_alignment`` is reported as ignored), ``status`` is the
boolean ``true``, the watermark style options come in the query string. Fields it would ignore silently are listed
in the answer's ``ignored_fields``; its model names are mapped to ours and the mapping is said in ``models``.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from deployments.common.admission import IDPHOTO_OUTPUT
from deployments.common.errors import InvalidParameter
from deployments.common.params import parse_params
from deployments.idphoto.background import Render
from deployments.idphoto.params import TRANSPARENT, hex_to_rgb, parse_colour

if TYPE_CHECKING:
    from serve_app.jobs.results import JobResult

RENDERS: tuple[Render, ...] = ("solid", "vertical", "radial")  # its 0 pure_color, 1 updown_gradient, 2 center_gradient
# Its matting models -> ours. We run MODNet (the official photographic-portrait weights) for every one of them.
MATTING_MODELS: dict[str, str] = {
    "modnet_photographic_portrait_matting": "the same MODNet weights",
    "hivision_modnet": "MODNet (official weights; Hivision's fine-tune is not shipped here)",
    "mnn_hivision_modnet": "MODNet (official weights; Hivision's fine-tune is not shipped here)",
    "rmbg-1.4": "MODNet (RMBG-1.4 is not shipped here; MODNet is the closest portrait matter we have)",
    "birefnet-v1-lite": "MODNet (BiRefNet is not shipped here; MODNet is the closest portrait matter we have)",
}
FACE_MODELS: dict[str, str] = {
    "mtcnn": "our face analyzer (BlazeFace + face mesh: finds the same faces, adds the landmarks framing needs)",
    "retinaface-resnet50": "our face analyzer (BlazeFace + face mesh; RetinaFace is not shipped here)",
    "face_plusplus": "our face analyzer (no online service is called)",
    "face++ (联网Online API)": "our face analyzer (no online service is called)",
}
# Hivision's 6-inch sheet; our 6inch layout is the same 4x6 in at 300 DPI.
LAYOUT = "6inch"
MAX_SIDE_PX = 4000
MATTING = "modnet"  # what every one of its matting model names runs here (MATTING_MODELS)


class FaceCount(Exception):
    """Not one face: its server answers ``{"status": false}`` (HTTP 200), and so do we, saying how many."""

    def __init__(self, count: int) -> None:
        super().__init__(f"{count} faces found; an ID photo needs exactly one")
        self.count = count


class _Form(BaseModel):
    """Shared by every endpoint: the image (a file or base64) and the output DPI."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    input_image_base64: str | None = None
    dpi: int = Field(default=300, ge=72, le=1200)


class _Sized(_Form):
    height: int = Field(default=413, ge=32, le=MAX_SIDE_PX)
    width: int = Field(default=295, ge=32, le=MAX_SIDE_PX)

    @model_validator(mode="after")
    def _within_the_output_cap(self) -> _Sized:
        """The ID-photo output cap of ``deployments/common/admission.py``, as our own ``IdPhotoParams`` apply it."""
        too_large = IDPHOTO_OUTPUT.problem(self.width, self.height)
        if too_large is not None:
            raise ValueError(too_large)
        return self


class _Framed(_Sized):
    face_detect_model: str = "mtcnn"
    hd: bool = True
    head_measure_ratio: float = Field(default=0.2, gt=0.0, lt=1.0)
    head_height_ratio: float = Field(default=0.45, gt=0.0, lt=1.0)
    top_distance_max: float = Field(default=0.12, ge=0.0, lt=0.5)
    top_distance_min: float = Field(default=0.10, ge=0.0, lt=0.5)

    @field_validator("face_detect_model")
    @classmethod
    def _face_model(cls, value: str) -> str:
        return _known(value, FACE_MODELS, "face_detect_model")

    def head_ratio(self) -> float:
        """Its face-box area share -> our crown-to-chin share of the height. A detector box is about as tall as it
        is wide and spans brows to chin; the head (crown to chin) is about 1.35 times its height."""
        box_height = math.sqrt(self.head_measure_ratio * self.width * self.height) / self.height
        return min(0.9, max(0.2, 1.35 * box_height))

    def top_ratio(self) -> float:
        """The middle of its crown-margin range."""
        return (self.top_distance_max + self.top_distance_min) / 2.0


class IdPhotoForm(_Framed):
    """``/idphoto``: defaults as its code has them (``face_align`` false, ``human_matting_model`` MODNet)."""

    human_matting_model: str = "modnet_photographic_portrait_matting"
    face_align: bool = False
    whitening_strength: float = 0
    brightness_strength: float = 0
    contrast_strength: float = 0
    sharpen_strength: float = 0
    saturation_strength: float = 0
    # ours, as HivisionIDPhotosPro offers clothes (its open server has no field for them): our /v1/idphoto's names
    attire: str = "none"
    attire_color: str | None = None

    @field_validator("human_matting_model")
    @classmethod
    def _matting_model(cls, value: str) -> str:
        return _known(value, MATTING_MODELS, "human_matting_model")

    def touch_ups(self) -> dict[str, float]:
        names = ("whitening", "brightness", "contrast", "sharpen", "saturation")
        return {f"{name}_strength": getattr(self, f"{name}_strength") for name in names}


class CropForm(_Framed):
    """``/idphoto_crop``: a transparent cut-out framed to the size."""


class MattingForm(_Form):
    human_matting_model: str = "hivision_modnet"

    @field_validator("human_matting_model")
    @classmethod
    def _matting_model(cls, value: str) -> str:
        return _known(value, MATTING_MODELS, "human_matting_model")


class BackgroundForm(_Form):
    color: str = "000000"
    kb: int | None = Field(default=None, ge=1, le=20000)
    render: int = Field(default=0, ge=0, le=2)

    @field_validator("color")
    @classmethod
    def _hex(cls, value: str) -> str:
        return parse_colour(value if value.startswith("#") else "#" + value)

    def colour_rgb(self) -> tuple[int, int, int]:
        return hex_to_rgb(self.color)

    def render_mode(self) -> Render:
        return RENDERS[self.render]


class LayoutForm(_Sized):
    kb: int | None = Field(default=None, ge=1, le=20000)


class KbForm(_Form):
    kb: int = Field(default=50, ge=1, le=20000)


class WatermarkForm(_Form):
    """Ranges as our ``IdPhotoParams`` watermark fields (size 8..200 px, opacity 0..1, space 0..500 px)."""

    text: str = "Hello"
    size: int = 20
    opacity: float = 0.5
    angle: float = 30
    color: str = "#000000"
    space: int = 25
    kb: int | None = Field(default=None, ge=1, le=20000)


FormT = TypeVar("FormT", bound=_Form)


def parse_form(model: type[FormT], fields: Mapping[str, Any]) -> tuple[FormT, list[str]]:
    """``fields`` validated by ``model`` (empty strings read as absent, as its clients send ``kb=``), and the names
    the model does not read (answered as ``ignored_fields``, never dropped unsaid)."""
    form = parse_params(model, fields)  # type: ignore[arg-type]  # a form, validated like a job's params
    return form, sorted(key for key, value in fields.items() if key not in model.model_fields and value != "")


def _framing(form: IdPhotoForm | CropForm) -> dict[str, Any]:
    """Its size, ratios and ``hd`` as our options: a transparent PNG with no lighting correction (its photos have
    none, and its clients put the colour behind themselves), every image at its ``dpi``, the HD copy too."""
    return {
        "width_px": form.width,
        "height_px": form.height,
        "dpi": form.dpi,
        "head_ratio": form.head_ratio(),
        "top_ratio": form.top_ratio(),
        "lighting": "off",
        "hd": form.hd,
        **({"hd_dpi": form.dpi} if form.hd else {}),
    }


def idphoto_options(form: IdPhotoForm) -> dict[str, Any]:
    """``/idphoto`` -> the ``idphoto`` job: the whole photo matted and framed, with its sliders."""
    options = {"background": TRANSPARENT, "format": "png", "matting": MATTING, "align": form.face_align}
    attire = {"attire": form.attire, **({"attire_color": form.attire_color} if form.attire_color else {})}
    return {**_framing(form), **options, **form.touch_ups(), **attire}


def crop_options(form: CropForm) -> dict[str, Any]:
    """``/idphoto_crop`` -> the ``idphoto-crop`` step (a transparent PNG of a cut-out; it does not align)."""
    return {**_framing(form), "align": False}


def matting_options(form: MattingForm) -> dict[str, Any]:
    return {"matting": MATTING, "dpi": form.dpi}


def _encoding(form: BackgroundForm | LayoutForm | WatermarkForm | KbForm) -> dict[str, Any]:
    """PNG, or with ``kb`` the best JPEG of at most ``kb`` KB (never padded up to it as its server does)."""
    return {"format": "jpeg", "max_kb": form.kb} if form.kb else {"format": "png"}


def background_options(form: BackgroundForm) -> dict[str, Any]:
    return {"background": form.color, "render": form.render_mode(), "dpi": form.dpi, **_encoding(form)}


def layout_options(form: LayoutForm) -> dict[str, Any]:
    """Its sheet: the photo resized to its ``width`` x ``height``, at ``dpi``, on our 6-inch sheet."""
    size = {"width_px": form.width, "height_px": form.height, "dpi": form.dpi}
    return {"layout": LAYOUT, **size, **_encoding(form)}


def watermark_options(form: WatermarkForm) -> dict[str, Any]:
    """Its watermark fields as ours (``IdPhotoParams`` holds their ranges)."""
    names = ("size", "opacity", "angle", "color", "space")
    style = {f"watermark_{name}": getattr(form, name) for name in names}
    return {"watermark_text": form.text, **style, "dpi": form.dpi, **_encoding(form)}


def kb_options(form: KbForm) -> dict[str, Any]:
    return {"max_kb": form.kb, "dpi": form.dpi}


def model_notes(**asked: str) -> dict[str, dict[str, str]]:
    """What ran for each model name the caller gave (the ``models`` key of an answer)."""
    tables = {"human_matting_model": MATTING_MODELS, "face_detect_model": FACE_MODELS}
    return {field: {"asked": name, "used": tables[field][name]} for field, name in asked.items()}


def image_answer(key: str, data: bytes, media_type: str) -> dict[str, str]:
    """``{key: data URL}``: its answers carry a ``data:`` URL; ours names the real media type (its always says
    PNG, even for the JPEG its ``kb`` option makes)."""
    return {key: f"data:{media_type};base64," + base64.b64encode(data).decode("ascii")}


def framed_answer(form: IdPhotoForm | CropForm, result: JobResult) -> dict[str, Any]:
    """``image_base64_standard`` and, with ``hd``, ``image_base64_hd``, plus our compliance report; not exactly one
    face is its ``status: false`` (:class:`FaceCount`)."""
    if result.meta.faces != 1:
        raise FaceCount(result.meta.faces)
    # The whole job carries its HD copy as a companion image, the crop step as ``hd_b64`` beside its report.
    hd = result.hd if "hd_b64" not in result.attachments else base64.b64decode(result.attachments["hd_b64"])
    answer = {
        **image_answer("image_base64_standard", result.body, result.media_type),
        **({} if hd is None else image_answer("image_base64_hd", hd, result.media_type)),
        "report": result.attachments["report"],
    }
    if isinstance(form, IdPhotoForm):
        notes = model_notes(human_matting_model=form.human_matting_model, face_detect_model=form.face_detect_model)
    else:
        notes = model_notes(face_detect_model=form.face_detect_model)
    return {**answer, "models": notes}


def matting_answer(form: MattingForm, result: JobResult) -> dict[str, Any]:
    image = image_answer("image_base64", result.body, result.media_type)
    return {**image, "models": model_notes(human_matting_model=form.human_matting_model)}


def photo_answer(form: BackgroundForm | LayoutForm | WatermarkForm | KbForm, result: JobResult) -> dict[str, Any]:
    """``image_base64``; with ``kb``, what size came out (``{"asked", "size_kb", "note"}``); the watermark's font."""
    answer: dict[str, Any] = image_answer("image_base64", result.body, result.media_type)
    if form.kb:
        encoding = result.attachments["encoding"]
        answer["kb"] = {"asked": form.kb, "size_kb": encoding["size_kb"], "note": encoding["note"]}
    if "font" in result.attachments:
        answer["font"] = result.attachments["font"]
    return answer


@dataclass(frozen=True)
class Endpoint:
    """One of its endpoints: its form, the job of our registry that answers it, the form's fields as that job's
    options, and the job's result in its JSON keys (``status`` and ``ignored_fields`` are added around them)."""

    form: type[_Form]
    job: str
    options: Callable[[Any], dict[str, Any]]
    answer: Callable[[Any, JobResult], dict[str, Any]]
    summary: str


ENDPOINTS: dict[str, Endpoint] = {
    "/idphoto": Endpoint(
        IdPhotoForm,
        "idphoto",
        idphoto_options,
        framed_answer,
        "A transparent ID photo (standard size and HD), as HivisionIDPhotos answers.",
    ),
    "/human_matting": Endpoint(
        MattingForm,
        "idphoto-matte",
        matting_options,
        matting_answer,
        "The person cut out of the whole photo (transparent PNG).",
    ),
    "/add_background": Endpoint(
        BackgroundForm,
        "idphoto-background",
        background_options,
        photo_answer,
        "A background colour (render 0/1/2) behind a transparent photo.",
    ),
    "/generate_layout_photos": Endpoint(
        LayoutForm,
        "idphoto-layout",
        layout_options,
        photo_answer,
        "A 6-inch print sheet of copies of a finished photo.",
    ),
    "/watermark": Endpoint(
        WatermarkForm,
        "idphoto-watermark",
        watermark_options,
        photo_answer,
        "A tiled text watermark (style options in the query string).",
    ),
    "/set_kb": Endpoint(
        KbForm, "idphoto-filesize", kb_options, photo_answer, "The photo as a JPEG of at most `kb` KB."
    ),
    "/idphoto_crop": Endpoint(
        CropForm,
        "idphoto-crop",
        crop_options,
        framed_answer,
        "A transparent cut-out framed to an ID photo size (standard and HD).",
    ),
}
HIVISION_PATHS: tuple[str, ...] = tuple(ENDPOINTS)


def base64_image(text: str) -> bytes:
    """``input_image_base64``: plain base64 or a ``data:`` URL."""
    encoded = text.partition(",")[2] if text.startswith("data:") else text
    try:
        return base64.b64decode(encoded, validate=True)
    except ValueError as exc:
        raise InvalidParameter(f"'input_image_base64' is not valid base64: {exc}") from None


def _known(value: str, table: Mapping[str, str], field: str) -> str:
    if value not in table:
        raise ValueError(f"unknown {field} {value!r}; accepted: {', '.join(table)}")
    return value
