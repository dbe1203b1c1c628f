"""Generated portraits (``POST /v1/portrait``, AI 写真 / 形象照): decode → the compliance gate → the face and the
matte → the conditions drawn from them (an OpenPose skeleton, the person's outline, the aligned face for the
IP-Adapter) → ``count`` candidates rendered together (seeds counting up from ``seed``) → optionally the Hires. fix →
the person's own face pasted back (``keep_face``) → the identity judge: the candidate most like the person is
returned; when none reaches the bar the next seeds are drawn, once, then 422 ``identity_changed``.

The orchestration only: the styles, the conditions and the paste live in ``deployments/portrait/``, the diffusion in
the Renderer (``deployments/render/``)."""

from __future__ import annotations

import asyncio
import functools
import math
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import cv2
import numpy as np

from deployments.common.admission import MEGAPIXEL, PHOTO_STAGE_INPUT, PixelCap
from deployments.common.errors import IdentityChanged, InvalidParameter, ModelUnavailable, NoFaceFound, ServiceError
from deployments.common.params import parse_params
from deployments.common.weights import ModelSpec
from deployments.edit.words import refuse_edit
from deployments.faces.types import ANALYZE_FACES, Face
from deployments.identity.types import FaceEmbedding, Identity
from deployments.identity.verdict import compare
from deployments.idphoto.matte import SEGMENT_PORTRAIT, LowResMatte, PhotoToMatte, matte_engine_info
from deployments.portrait.conditions import (
    Canvas,
    adapter_face,
    fit_canvas,
    keep_face,
    outline_condition,
    pose_condition,
)
from deployments.portrait.params import MAX_COUNT, STYLE_NAMES, PortraitParams
from deployments.portrait.styles import PortraitStyle, default_styles
from deployments.render.types import DEFAULT_RENDER_MODEL, RENDER, SIDE_MULTIPLE_PX, Condition, Rendered, RenderRequest
from deployments.restore.params import RestoreParams
from serve_app.backend import Backend, OnProgress
from serve_app.jobs.compliance import require_compliant
from serve_app.jobs.context import JobContext, Timings, decode_upload
from serve_app.jobs.deadline import deadline_unix_s, run_in_worker
from serve_app.jobs.identity import IdentityReport, embed_faces, judged_face
from serve_app.jobs.progress import RenderSteps
from serve_app.jobs.prompts import english_prompt
from serve_app.jobs.restore import upscale_background
from serve_app.jobs.results import JobResult, encode_job_result

# A render with the Hires. fix is this much larger a side: SDXL's ~1 MP buckets become ~2.3 MP, under the cap.
HIRES_SCALE = 1.5
HIRES_STRENGTH = 0.4  # how much of the upscaled render the second pass redraws: detail, not a new picture
PORTRAIT_OUTPUT = PixelCap("a generated portrait", int(2.5 * MEGAPIXEL))  # the Renderer's own default bound
PORTRAIT_PHRASES = "comma-separated visual phrases for a portrait (clothing, setting, light, mood)"
ROUNDS = 2  # candidates drawn at most twice (``count`` seeds each) before the identity bar refuses


def parse(fields: Mapping[str, Any], context: JobContext) -> PortraitParams:
    params = parse_params(PortraitParams, fields)
    refuse_edit(params.prompt)  # the edit job's policy: no change of ethnicity, no child made older or sexualised
    style = chosen_style(params)[0]
    width, height = output_size(params, style)
    if problem := PORTRAIT_OUTPUT.problem(width, height):
        raise InvalidParameter(problem, details={"field": "hires" if params.hires else "width"})
    return params


def chosen_style(params: PortraitParams) -> tuple[PortraitStyle, str]:
    """The style the params name, else the one whose words the prompt uses (the longest match), else the first."""
    styles = default_styles()
    if params.style is not None:
        return styles[params.style], "style"
    text = (params.prompt or "").lower()
    matches = [(len(word), name) for name in STYLE_NAMES for word in styles[name].words if word.lower() in text]
    if matches:
        return styles[max(matches)[1]], "prompt"
    return styles[STYLE_NAMES[0]], "default"


def render_work(params: PortraitParams, context: JobContext) -> float:
    """The rendering the job plans, in megapixel-steps: every candidate of the first round and its Hires. fix
    redraw (what the synchronous route's budget weighs; a second round of seeds is not foreseen)."""
    style = chosen_style(params)[0]
    width, height = render_size(params, style)
    base = RenderRequest(prompt="", width=width, height=height, steps=params.steps or style.steps)
    work = base.steps_to_run * width * height / 1e6
    if params.hires:
        width, height = output_size(params, style)
        work += _redraw(base).steps_to_run * width * height / 1e6
    return params.count * work


def render_size(params: PortraitParams, style: PortraitStyle) -> tuple[int, int]:
    return params.width or style.width, params.height or style.height


def output_size(params: PortraitParams, style: PortraitStyle) -> tuple[int, int]:
    width, height = render_size(params, style)
    if not params.hires:
        return width, height
    return _multiple(width * HIRES_SCALE), _multiple(height * HIRES_SCALE)


def _multiple(side: float) -> int:
    return int(round(side / SIDE_MULTIPLE_PX)) * SIDE_MULTIPLE_PX


@dataclass(frozen=True)
class Candidate:
    """One rendered portrait, its face kept or not, and how like the person it is (None: the judge could not say)."""

    rgb: np.ndarray
    seed: int
    rendered: Rendered
    identity: Identity | None
    judge_unavailable: str | None = None


async def run(backend: Backend, data: bytes, params: PortraitParams, context: JobContext) -> JobResult:
    style, chosen_by = chosen_style(params)
    timings = Timings()
    with timings.phase("decode"):
        source = await decode_upload(data, context.limits, PHOTO_STAGE_INPUT)
    with timings.phase("compliance"):
        gate = await require_compliant(backend, source.rgb, "generative", context)
    with timings.phase("analyze"):
        faces, low = await asyncio.gather(
            backend.call(ANALYZE_FACES, source.rgb), backend.call(SEGMENT_PORTRAIT, PhotoToMatte(source.rgb))
        )
    if not faces:
        raise NoFaceFound("a generated portrait needs the person's face, and none was found in the photo")
    face = max(faces, key=lambda found: (found.box[2] - found.box[0]) * (found.box[3] - found.box[1]))
    width, height = render_size(params, style)
    canvas = fit_canvas((source.width, source.height), face, (width, height))
    with timings.phase("conditions"):
        matte = await run_in_worker(_canvas_matte, low, canvas)
        conditions = await run_in_worker(_conditions, backend.manifest, style, face, canvas, matte)
        adapter = await run_in_worker(adapter_face, source.rgb, face) if _adapter_scale(params, style) > 0 else None
    prompt, prompt_note = await _renderer_prompt(backend, style, params.prompt)
    base = RenderRequest(
        prompt=prompt,
        negative_prompt=style.negative_prompt,
        width=width,
        height=height,
        steps=params.steps or style.steps,
        scheduler=style.scheduler,
        guidance=style.guidance,
        conditions=conditions,
        adapter_image=adapter,
        adapter_scale=_adapter_scale(params, style) if adapter is not None else 0.0,
        loras=tuple(style.loras.items()),
        model=DEFAULT_RENDER_MODEL,
        deadline_unix_s=deadline_unix_s(),
    )
    first_seed = params.seed if params.seed is not None else secrets.randbelow(2**31 - ROUNDS * MAX_COUNT)
    before = embed_faces(backend, [judged_face(source.rgb, face)])
    tried: list[Candidate] = []
    steps = RenderSteps()  # the job's progress: steps done of the renders planned so far
    for round_index in range(ROUNDS):
        seeds = [first_seed + round_index * params.count + index for index in range(params.count)]
        drawn = {seed: steps.plan(("render", seed), base.steps_to_run) for seed in seeds}
        redrawn = {seed: steps.plan(("hires", seed), _redraw(base).steps_to_run) for seed in seeds if params.hires}
        with timings.phase("render"):
            rendered = await asyncio.gather(
                *(backend.call(RENDER, replace(base, seed=seed), on_progress=drawn[seed]) for seed in seeds)
            )
        if params.hires:
            with timings.phase("hires"):
                rendered = await asyncio.gather(
                    *(_hires(backend, base, done, params, style, redrawn[done.seed]) for done in rendered)
                )
        with timings.phase("identity"):
            tried += await _judged(backend, source.rgb, face, canvas, rendered, params, before)
        best = _best(tried)
        if _passes(best, params.min_identity):
            break
    else:
        raise _identity_changed(tried, params.min_identity)
    report = {
        "portrait": {
            "style": style.name,
            "chosen_by": chosen_by,
            "prompt": prompt,
            "prompt_note": prompt_note,
            "negative_prompt": style.negative_prompt,
            "seed": best.seed,
            "candidates": [{"seed": c.seed, "identity": c.identity and c.identity.to_json()} for c in tried],
            "controlnets": {condition.controlnet: condition.scale for condition in conditions},
            "adapter_scale": base.adapter_scale,
            "loras": dict(style.loras),
            "hires": params.hires,
            "keep_face": params.keep_face,
            "batch_size": best.rendered.batch_size,
            "render_ms": best.rendered.timings_ms,
            "compliance": gate.checked_by,
        }
    }
    engines = [*best.rendered.engines, matte_engine_info(backend.manifest, low.matting)]
    identity = IdentityReport([best.identity] if best.identity else None, best.judge_unavailable).lowest()
    return await encode_job_result(
        params.model_copy(update={"style": style.name, "seed": best.seed}),
        source,
        best.rgb,
        engines,
        faces=1,
        timings=timings,
        fallback_engine="diffusers-sdxl",
        report=report,
        identity=identity,
    )


def _canvas_matte(low: LowResMatte, canvas: Canvas) -> np.ndarray:
    """The person's matte on the canvas, uint8 (what the conditions draw from)."""
    alpha = low.warp_to(canvas.matrix, (canvas.width, canvas.height))
    return np.clip(np.rint(alpha * 255.0), 0, 255).astype(np.uint8)


def _adapter_scale(params: PortraitParams, style: PortraitStyle) -> float:
    return params.likeness if params.likeness is not None else style.adapter_scale


def _conditions(
    manifest: Mapping[str, ModelSpec], style: PortraitStyle, face: Face, canvas: Canvas, matte: np.ndarray
) -> tuple[Condition, ...]:
    """Each ControlNet the style weighs, on the image it takes: drawn here from the face and the matte."""
    images = {
        "openpose": lambda: pose_condition(face, canvas, matte),
        "canny": lambda: outline_condition(matte),
    }
    return tuple(
        Condition(controlnet_for(manifest, condition), images[condition](), scale)
        for condition, scale in style.controlnets.items()
        if scale > 0
    )


def controlnet_for(manifest: Mapping[str, ModelSpec], condition: str) -> str:
    """The manifest's ControlNet for ``condition`` (its ``args.condition``)."""
    for name, spec in manifest.items():
        if spec.task == "controlnet" and spec.args.get("condition") == condition:
            return name
    raise ModelUnavailable(f"the model manifest has no {condition} ControlNet (an entry with args.condition)")


async def _renderer_prompt(backend: Backend, style: PortraitStyle, wish: str | None) -> tuple[str, str | None]:
    """The style's prompt with the caller's words added (in English: ``serve_app/jobs/prompts.py``)."""
    if not wish:
        return style.prompt, None
    words = await english_prompt(
        backend, wish, "comma-separated visual phrases for a portrait (clothing, setting, light, mood)"
    )
    return (f"{style.prompt}, {words.text}" if words.text else style.prompt), words.note


def _redraw(base: RenderRequest) -> RenderRequest:
    """The Hires. fix's redraw of ``base`` (its start image and size set when it runs): img2img at
    ``HIRES_STRENGTH``, which runs int(steps × strength) steps, at least 1; no ControlNet (the composition is set)."""
    steps = max(base.steps, math.ceil(1 / HIRES_STRENGTH))
    return replace(base, kind="img2img", strength=HIRES_STRENGTH, steps=steps, conditions=())


async def _hires(
    backend: Backend,
    base: RenderRequest,
    done: Rendered,
    params: PortraitParams,
    style: PortraitStyle,
    on_progress: OnProgress,
) -> Rendered:
    """Upscale (Real-ESRGAN x2 where its weights are present, else Lanczos, then down to 1.5x) and redraw at
    ``HIRES_STRENGTH`` from the same seed: detail at the larger size without a new composition."""
    width, height = output_size(params, style)
    upscaled, _ = await upscale_background(backend, done.image, RestoreParams(upscale=2))
    start = await run_in_worker(functools.partial(cv2.resize, upscaled, (width, height), interpolation=cv2.INTER_AREA))
    second = replace(_redraw(base), image=start, width=width, height=height, seed=done.seed)
    redrawn = await backend.call(RENDER, second, on_progress=on_progress)
    timings = {f"hires_{phase}": ms for phase, ms in redrawn.timings_ms.items()}
    return replace(redrawn, timings_ms={**done.timings_ms, **timings}, batch_size=done.batch_size)


async def _judged(
    backend: Backend,
    photo: np.ndarray,
    face: Face,
    canvas: Canvas,
    rendered: Sequence[Rendered],
    params: PortraitParams,
    before: asyncio.Future[list[FaceEmbedding]],
) -> list[Candidate]:
    """Each render with the face kept (or not) and its identity against the photo's face; where the judge cannot
    answer, each candidate says why (refused only where a bar was asked)."""
    kept = []
    for done in rendered:
        scaled = canvas.resized(done.image.shape[1], done.image.shape[0])
        rgb = await run_in_worker(keep_face, done.image, photo, face, scaled) if params.keep_face else done.image
        kept.append((rgb, scaled))
    try:
        after = await embed_faces(backend, [judged_face(rgb, face.moved(scaled.matrix)) for rgb, scaled in kept])
        (photo_face,) = await before
    except (ServiceError, InvalidParameter) as exc:  # InvalidParameter: no judge deployed in this app
        if params.min_identity is not None:
            raise
        why = f"{exc.code}: {exc.message}"
        return [Candidate(rgb, done.seed, done, None, why) for (rgb, _), done in zip(kept, rendered)]
    return [
        Candidate(rgb, done.seed, done, compare(photo_face, embedding))
        for (rgb, _), done, embedding in zip(kept, rendered, after)
    ]


def _best(candidates: Sequence[Candidate]) -> Candidate:
    """The candidate most like the person (the first, when the judge could not say)."""
    return max(candidates, key=lambda c: -1.0 if c.identity is None else c.identity.similarity)


def _passes(candidate: Candidate, min_identity: float | None) -> bool:
    """Like enough: at least ``min_identity``, by default the judge's own same-person bar."""
    if candidate.identity is None:
        return True
    bar = min_identity if min_identity is not None else candidate.identity.threshold
    return candidate.identity.similarity >= bar


def _identity_changed(tried: Sequence[Candidate], min_identity: float | None) -> IdentityChanged:
    """The 422 after every round: each candidate was judged (one without an identity would have passed)."""
    judged = [(c.seed, c.identity) for c in tried if c.identity is not None]
    best = max((identity for _, identity in judged), key=lambda identity: identity.similarity)
    bar = min_identity if min_identity is not None else best.threshold
    return IdentityChanged(
        f"none of the {len(judged)} portraits drawn (seeds {judged[0][0]}..{judged[-1][0]}) is like enough to the "
        f"person: the best similarity {best.similarity:.3f} < {bar:g} ({best.judge}); try keep_face=true, a higher "
        "likeness or another seed",
        details={"min_identity": bar, "candidates": [{"seed": seed, **i.to_json()} for seed, i in judged]},
    )
