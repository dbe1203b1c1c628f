"""The job registry: one :class:`JobEntry` per job, the only place a job is named. No Ray, no torch.

A job is one folder ``deployments/<name>/`` (its pure pipeline, its params model, its ``deployment.py``), one module
``serve_app/jobs/<name>.py`` (the orchestration: ``parse(fields, context) -> params`` and
``run(backend, data, params, context) -> JobResult``, found by the job's name) and one entry in ``JOB_ENTRIES``.
What the app derives from the entries:

- the HTTP route ``POST /v1/<name>`` with its OpenAPI text and result media types (``routes/jobs.py``), and the
  route the backfill CLI posts to (``route``);
- the wire ``Literal`` of job names (``JobName``: ``ResultMeta.job``, ``InstructionOut.task``), the tasks a bucket
  route accepts, and the file extension of each result media type (``result_extension``);
- the OpenAI model list (a model per job) and the display names, English and Chinese (``title``: the web page's too,
  from ``GET /v1/tasks``), and the job a result names (``job_of``: by its params model);
- the instruction interpreters' text: the LLM's system prompt (``prompt_hint``) and the rules' "no job" refusal
  (``example_words``); ``tests/unit/test_registry.py`` holds ``instructions/lexicon.yaml``, the web page's job list
  (``web/common.js`` ROUTES, ``index.html``) and every Serve YAML (``deployments``) to the entries.

Fields of an entry:

``name``
    the task name on the wire (``restore``); also the folder and module names above.
``params_model``
    the job's pydantic parameter model (``deployments/<name>/params.py``): form fields, JSON keys, bucket params.
``title``
    ``(English, Chinese)`` display names ("photo restoration", "照片修复").
``description``
    the OpenAPI description of ``POST /v1/<name>`` (what it does; what ``return=json`` adds).
``result_media_types``
    every media type a result of the job may have, with its file extension (``{"image/png": "png"}``); a job
    answering anything else is our bug (500). Images today; video and others are just more entries.
``prompt_hint``
    one line for the language model: what the job does, with words people use for it.
``example_words``
    words the rules suggest when a prompt names no job ("修复, 老照片, 放大2倍").
``frames``
    True when the job maps a photo to a photo frame by frame (restore, cartoon): a video given to it through
    ``POST /v1/jobs`` or a bucket route is processed frame by frame (``serve_app/jobs/video.py``) into ``video/mp4``,
    and its module offers ``frame_processor(backend, params, context)``. The synchronous route refuses a video
    (415 ``video_needs_job``) whatever the job.
``deployments``
    the Serve deployments the job calls (each Serve YAML configures every one; the restorers, one per manifest
    entry of ``task: face_restoration``, come from the manifest).
``on_page``
    False for a whole job the web page does not offer (``identity`` compares two photos; the page sends one): HTTP,
    async jobs, bucket routes and the instruction interpreters reach it as any job.
``step_of``
    set on one step of a whole job (``idphoto-matte`` is a step of ``idphoto``): named ``<step_of>-<step>``, routed at
    ``POST /v1/<step_of>/<step>``, its orchestration ``STEPS[<step>]`` of ``serve_app/jobs/<step_of>_steps.py``
    (``parse`` and ``run`` as above). A step is a job everywhere else (async jobs, bucket routes, OpenAI model ids,
    the instruction interpreters), but the web page offers whole jobs only, the rules pick a step only when the prompt
    names it (``只抠图``), and a key allowed the whole job may run its steps.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from deployments.cartoon.params import CartoonParams
from deployments.colorize.params import ColorizeParams
from deployments.common.errors import InternalError, InvalidParameter
from deployments.common.params import JobParams
from deployments.edit.params import EditParams
from deployments.identity.params import IdentityParams
from deployments.idphoto.params import IdPhotoParams
from deployments.idphoto.step_params import STEP_PARAMS
from deployments.portrait.params import PortraitParams
from deployments.restore.params import RestoreParams


@dataclass(frozen=True)
class JobEntry:
    """One job (fields: the module docstring)."""

    name: str
    params_model: type[JobParams]
    title: tuple[str, str]
    description: str
    result_media_types: Mapping[str, str]
    prompt_hint: str
    example_words: str
    deployments: tuple[str, ...]
    frames: bool = False
    step_of: str | None = None
    on_page: bool = True

    @property
    def step(self) -> str | None:
        """The step's own name (``matte`` of ``idphoto-matte``); None for a whole job."""
        return None if self.step_of is None else self.name.removeprefix(f"{self.step_of}-")

    @property
    def route(self) -> str:
        return f"/v1/{self.name}" if self.step_of is None else f"/v1/{self.step_of}/{self.step}"

    @property
    def module(self) -> str:
        """The orchestration module: ``serve_app.jobs.<name>``, or ``<step_of>_steps`` for a step."""
        return f"serve_app.jobs.{self.name if self.step_of is None else f'{self.step_of}_steps'}"

    @property
    def photo_media_types(self) -> tuple[str, ...]:
        """What the synchronous route answers (a video result comes only from a job or a bucket route)."""
        return tuple(media_type for media_type in self.result_media_types if not media_type.startswith("video/"))


def _idphoto_step(step: str, title: tuple[str, str], description: str, media_types: Mapping[str, str], **words):
    return JobEntry(
        name=f"idphoto-{step}",
        params_model=STEP_PARAMS[step],
        title=title,
        description=f"ID photo step by step: {description} `return=json` adds the metadata.",
        result_media_types=media_types,
        step_of="idphoto",
        **words,
    )


def _idphoto_steps() -> tuple[JobEntry, ...]:
    """``POST /v1/idphoto/<step>``: each on the output of the one before (matte → crop → background → watermark →
    layout or filesize), so a front-end mattes once and previews colours, sizes and sheets."""
    photo = {"image/jpeg": "jpg", "image/png": "png"}
    return (
        _idphoto_step(
            "matte",
            ("ID photo: cut-out", "证件照：抠图"),
            "the person cut out of the whole photo, a transparent PNG of the photo's size (`matting` picks the model).",
            {"image/png": "png"},
            prompt_hint="only cut the person out of a photo: a transparent PNG, no ID-photo framing (只抠图, 抠出人像)",
            example_words="只抠图, cut out the person",
            deployments=("PortraitMatter",),
        ),
        _idphoto_step(
            "crop",
            ("ID photo: crop", "证件照：裁剪"),
            "a transparent cut-out (from the matte step) framed to a standard (`spec`) or a custom size, with the "
            "touch-ups; `return=json` adds the compliance report and, with `hd`, the HD copy (`hd_b64`).",
            {"image/png": "png"},
            prompt_hint="frame an already cut-out transparent PNG to an ID-photo size (只裁剪抠好的图)",
            example_words="只裁剪, crop the cut-out",
            deployments=("FaceAnalyzer",),
        ),
        _idphoto_step(
            "background",
            ("ID photo: background", "证件照：换底色"),
            "a colour (`background`, `render`) behind a transparent photo; `min_kb`/`max_kb` for a JPEG.",
            photo,
            prompt_hint="put a background colour behind an already cut-out transparent photo (只换底色)",
            example_words="只换底色, change the background colour",
            deployments=(),
        ),
        _idphoto_step(
            "watermark",
            ("ID photo: watermark", "证件照：水印"),
            "a tiled text watermark (`watermark_text`, `watermark_size`...) over a photo.",
            photo,
            prompt_hint="add a tiled text watermark to a finished photo (加水印)",
            example_words="加水印, add a watermark",
            deployments=(),
        ),
        _idphoto_step(
            "layout",
            ("ID photo: print sheet", "证件照：排版"),
            "copies of a finished photo at its physical size (its DPI, or `dpi`) on the sheet `layout` names.",
            photo,
            prompt_hint="lay a finished ID photo out on a print sheet (只排版)",
            example_words="只排版, lay out this photo",
            deployments=(),
        ),
        _idphoto_step(
            "filesize",
            ("ID photo: file size", "证件照：改大小"),
            "a finished photo as a JPEG inside [`min_kb`, `max_kb`] (quality searched, never padded).",
            {"image/jpeg": "jpg"},
            prompt_hint="re-encode a finished photo to a file size in KB (只压缩, 只改文件大小)",
            example_words="只压缩, compress only",
            deployments=(),
        ),
    )


JOB_ENTRIES: tuple[JobEntry, ...] = (
    JobEntry(
        name="restore",
        params_model=RestoreParams,
        title=("photo restoration", "照片修复"),
        description="Restore every face of a photo (GFPGAN, CodeFormer or GPEN; the classic engine when weights are "
        "absent) and paste it back; `upscale` enlarges the rest with Real-ESRGAN or Lanczos. The `X-Portrait-Engine` "
        "header (and `meta.engine` with `return=json`) names the engine that ran.",
        result_media_types={"image/jpeg": "jpg", "image/png": "png", "image/webp": "webp", "video/mp4": "mp4"},
        prompt_hint="repair/sharpen an old or blurry photo, optionally upscale (修复, 老照片, 放大)",
        example_words="修复, 老照片, 放大2倍",
        deployments=("FaceAnalyzer", "BackgroundUpscaler"),
        frames=True,
    ),
    JobEntry(
        name="idphoto",
        params_model=IdPhotoParams,
        title=("ID photo", "证件照"),
        description="An ID photo to a standard (`spec`) or a custom size, with a compliance report. `return=json` "
        "adds the report, the print sheet (`layout`) and the HD copy (`hd`); touch-ups of the person (`*_strength`), "
        "`horizontal_flip`, a watermark (`watermark_*`) and a studio backdrop (`background_image`) as in "
        "HivisionIDPhotos; `strict=true` refuses a non-compliant result with 422 and the reasons. The image response "
        "carries `X-Portrait-Compliance: pass|fail`.",
        result_media_types={"image/jpeg": "jpg", "image/png": "png"},
        prompt_hint="an ID/passport/visa photo to a standard size and background (证件照, 一寸, 蓝底)",
        example_words="证件照, 一寸, 蓝底, US passport",
        deployments=("FaceAnalyzer", "PortraitMatter", "ComplianceGate", "Renderer", "IdentityJudge"),
    ),
    JobEntry(
        name="cartoon",
        params_model=CartoonParams,
        title=("cartoon", "卡通"),
        description="Cartoonize a photo (DCT-Net whole image + per-face heads; the classic engine when weights are "
        "absent).",
        result_media_types={"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp", "video/mp4": "mp4"},
        prompt_hint="turn the photo into a cartoon style (卡通, 动漫, 素描)",
        example_words="卡通, 动漫, 素描",
        deployments=("FaceAnalyzer", "CartoonHead", "CartoonBackground"),
        frames=True,
    ),
    JobEntry(
        name="colorize",
        params_model=ColorizeParams,
        title=("colorization", "上色"),
        description="Colorize a black-and-white photo with DDColor (the official inference: colours predicted from "
        "the lightness at `input_size`², laid on the photo's own full-resolution lightness). Without DDColor's "
        "weights the answer is 503 `model_unavailable` naming the command that fetches them; there is no non-neural "
        "colorization.",
        result_media_types={"image/jpeg": "jpg", "image/png": "png", "image/webp": "webp"},
        prompt_hint="colorize a black-and-white or sepia photo (上色, 黑白照片上色, colorize)",
        example_words="上色, 黑白照片上色, colorize",
        deployments=("Colorizer",),
    ),
    JobEntry(
        name="edit",
        params_model=EditParams,
        title=("film look", "风格编辑"),
        description="Give a portrait a film look (80s Hong Kong film, Kodak Portra, Fujifilm, black-and-white, faded "
        "print, cinematic teal-orange, film grain, skin texture; `GET /v1/edit/looks`), named by `look` or picked from "
        "the words of `prompt`: colours, tone, halation, vignette and seeded grain, never the shape of a face (the "
        "LOOK engine, no model). The faces are restored first (`restore`); `scope=face` styles only a feathered mask "
        "over each face; `identity_keep` blends the person's own face back. Each face's identity before and after is "
        "reported (`min_identity` refuses a lower one); a request to change a person's ethnicity, or to make a child "
        "older or sexualised, is refused (422 `instruction_refused`). `model=flux2-klein` (FLUX.2 [klein] 4B, the "
        "recommended neural editor) or `model=instructpix2pix` (InstructPix2Pix on SDXL, the small one) edits by the "
        "prompt's words in the Renderer (the generative weights); `model=external` sends the photo and the prompt "
        "to the operator's OpenAI-compatible images endpoint instead (`PORTRAIT_EDIT_ENDPOINT_URL`; 502 "
        "`editor_failed`, 504 `editor_timeout`). `X-Portrait-Engine` names the engine (`look`, "
        "`diffusers-flux2-klein`, `diffusers-sdxl-instructpix2pix`, `external`).",
        result_media_types={"image/jpeg": "jpg", "image/png": "png", "image/webp": "webp"},
        prompt_hint="give a portrait a film look or texture: Hong Kong film, Kodak, Fuji, grain, faded, cinematic "
        "(港风, 胶片, 颗粒感, 质感, 滤镜)",
        example_words="港风胶片, 胶片颗粒, film look",
        deployments=("FaceAnalyzer", "IdentityJudge", "Renderer", "ComplianceGate"),
    ),
    JobEntry(
        name="portrait",
        params_model=PortraitParams,
        title=("generated portrait", "AI写真"),
        description="A generated portrait of the person in one selfie (AI 写真 / 形象照): a style (business headshot, "
        "studio white, graduation, 80s Hong Kong, hanfu, outdoor; `GET /v1/portrait/styles`) rendered by Stable "
        "Diffusion XL, posed by a skeleton and an outline drawn from the photo, the likeness carried by an IP-Adapter "
        "on the aligned face; `keep_face` pastes the person's own face back. The photo passes the compliance gate "
        "first; the identity judge compares the result's face with the photo's, and a result below `min_identity` "
        "(default: the judge's same-person bar) is redrawn with the next seeds, then refused (422 "
        "`identity_changed`). Seconds on a GPU, minutes on a CPU: `POST /v1/jobs` suits it. `return=json` adds the "
        "seed (reproducible), the prompt, the candidates and every model's weights; without the generative weights "
        "503 `model_unavailable` names `portrait models pull --group generative`.",
        result_media_types={"image/jpeg": "jpg", "image/png": "png", "image/webp": "webp"},
        prompt_hint="generate a new portrait photo of the person in a style: business headshot, graduation, hanfu, "
        "studio (写真, AI写真, 形象照, 商务照, 毕业照, 汉服写真)",
        example_words="AI写真, 商务形象照, generated portrait",
        deployments=("ComplianceGate", "FaceAnalyzer", "PortraitMatter", "Renderer", "IdentityJudge"),
    ),
    JobEntry(
        name="identity",
        params_model=IdentityParams,
        title=("same person?", "人脸比对"),
        description="Is the person in `image` the one in `reference` (the largest face of each unless `face` / "
        "`reference_face` name another): `same_person`, `similarity`, `judge` and its `threshold` (SFace where its "
        "weights are present, dlib's ResNet otherwise). The same judge reports, in every job that changes faces, how "
        "far each face moved (`identity`).",
        result_media_types={"application/json": "json"},
        prompt_hint="tell whether two photos show the same person (是不是同一个人, 人脸比对)",
        example_words="人脸比对, 是不是同一个人, same person",
        deployments=("FaceAnalyzer", "IdentityJudge"),
        on_page=False,
    ),
    *_idphoto_steps(),
)

JOB_NAMES: tuple[str, ...] = tuple(entry.name for entry in JOB_ENTRIES)
WHOLE_JOBS: tuple[str, ...] = tuple(entry.name for entry in JOB_ENTRIES if entry.step_of is None)
PAGE_JOBS: tuple[str, ...] = tuple(entry.name for entry in JOB_ENTRIES if entry.step_of is None and entry.on_page)
JobName = Literal[JOB_NAMES]  # the wire's job names
_ENTRIES = {entry.name: entry for entry in JOB_ENTRIES}


def job_entry(name: str) -> JobEntry:
    try:
        return _ENTRIES[name]
    except KeyError:
        raise InvalidParameter(f"unknown task {name!r}; tasks: {', '.join(JOB_NAMES)}") from None


_BY_PARAMS = {entry.params_model: entry for entry in JOB_ENTRIES}
if len(_BY_PARAMS) != len(JOB_ENTRIES):
    raise InternalError("two registry entries share a params model: a job's params must name its job (job_of)")


def job_of(params: JobParams) -> JobEntry:
    """The job whose validated options ``params`` are (every entry has its own ``params_model``): how a result
    names its job, so no job module spells its own name."""
    try:
        return _BY_PARAMS[type(params)]
    except KeyError:
        raise InternalError(f"{type(params).__name__} is no job's params model") from None


def result_extension(media_type: str) -> str:
    """The file extension a result of ``media_type`` is stored under (bucket results, downloads)."""
    for entry in JOB_ENTRIES:
        if media_type in entry.result_media_types:
            return entry.result_media_types[media_type]
    raise InternalError(f"no job answers {media_type!r}; media types: the registry's result_media_types")
