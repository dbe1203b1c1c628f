"""Text-guided face style (``POST /v1/edit``): decode → (a neural editor: the compliance gate) → restore the faces
(``restore``) → the editor (the LOOK engine: a film look over the photo; ``model=instructpix2pix`` or
``model=flux2-klein``: InstructPix2Pix or FLUX.2 [klein] in the Renderer; ``model=external``: the operator's
OpenAI-compatible images endpoint, ``serve_app/edit_endpoint.py``; the neural ones by the prompt's words) laid over the
photo, or only the faces with ``scope=face`` → the person's own face blended back (``identity_keep``) → the identity
judge per face, the restored face before against the edited face after → encode.

The refusal policy runs first (``deployments/edit/words.py``): at parse, so the instruction interpreters, bucket
routes and the HTTP route refuse alike. The orchestration only: the pure steps live in ``deployments/edit/``."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from deployments.common.admission import EDIT_OUTPUT
from deployments.common.engine import EngineInfo
from deployments.common.errors import InvalidParameter, NoFaceFound
from deployments.common.params import parse_params
from deployments.common.weights import ModelSpec
from deployments.edit.editor import EditedPhoto, LookEditor, PhotoToEdit
from deployments.edit.looks import Look, default_looks
from deployments.edit.mask import face_mask
from deployments.edit.params import EXTERNAL, FLUX2_KLEIN, INSTRUCT, LOOK_NAMES, EditParams
from deployments.edit.pipeline import compose_edit, keep_face_detail
from deployments.edit.words import look_from_prompt, refuse_edit
from deployments.faces.types import ANALYZE_FACES, Face
from deployments.render.types import RENDER, RenderKind, RenderRequest, model_side_px, side_grid
from deployments.restore.gray import is_gray
from deployments.restore.params import RestoreParams
from deployments.restore.pipeline import select_faces
from serve_app.backend import Backend
from serve_app.edit_endpoint import EditEndpoint, EndpointEditor, require_endpoint
from serve_app.jobs.compliance import require_compliant
from serve_app.jobs.context import JobContext, Timings, decode_upload
from serve_app.jobs.deadline import deadline_unix_s, run_in_worker
from serve_app.jobs.identity import judged_face, report_identities
from serve_app.jobs.progress import RenderSteps
from serve_app.jobs.prompts import english_prompt
from serve_app.jobs.restore import default_restore_model, restore_faces
from serve_app.jobs.results import JobResult, encode_job_result

RESTORE_DEFAULTS = RestoreParams()  # the faces restored as the restore job's defaults restore them


@dataclass(frozen=True)
class RenderedEditor:
    """A neural editor the Renderer runs: its manifest entry and render kind, its name in messages, the long side it
    renders (``side_px``, which the entry's ``args.side_px`` overrides) and the text's guidance."""

    model: str
    kind: RenderKind
    title: str
    side_px: int
    guidance: float

    def side_px_in(self, manifest: Mapping[str, ModelSpec]) -> int:
        return model_side_px(manifest, self.model, self.side_px)


# InstructPix2Pix at its training size, the text at 7 (the photo's weight is RenderRequest.image_guidance: 1.5, the
# paper's); FLUX.2 [klein] 4B at its native size, step-distilled: its pipeline runs no guidance pass
RENDERED_EDITORS = {
    INSTRUCT: RenderedEditor("sdxl-instructpix2pix-768", "instruct", "InstructPix2Pix", 768, 7.0),
    FLUX2_KLEIN: RenderedEditor("flux2-klein-4b", "reference_edit", "FLUX.2 [klein]", 1024, 1.0),
}


def parse(fields: Mapping[str, Any], context: JobContext) -> EditParams:
    params = parse_params(EditParams, fields)
    refuse_edit(params.prompt)
    if params.model == EXTERNAL:
        require_endpoint(context.edit_endpoint)  # 503 now, before an asynchronous job stores its upload
    elif params.model is None and params.look is None and params.prompt is not None:
        chosen_look(params)  # a prompt naming no look is refused now, not after the upload is decoded
    return params


def render_work(params: EditParams, context: JobContext) -> float:
    """The rendering the job plans, in megapixel-steps: a Renderer editor's render at its size (at most a square of
    its long side); none for the other editors."""
    editor = RENDERED_EDITORS.get(params.model)
    if editor is None:
        return 0.0
    return params.steps * editor.side_px_in(context.manifest) ** 2 / 1e6


def looks_named() -> str:
    looks = default_looks()
    return ", ".join(f"{name} ({looks[name].title_en} / {looks[name].title_zh})" for name in LOOK_NAMES)


def chosen_look(params: EditParams) -> tuple[Look, str]:
    """The look the params name, else the one the prompt's words pick, and which of the two chose it."""
    looks = default_looks()
    if params.look is not None:
        return looks[params.look], "look"
    name = look_from_prompt(params.prompt, looks) if params.prompt else None
    if name is None:
        said = f"the prompt {params.prompt!r} names no look" if params.prompt else "no look and no prompt were given"
        raise InvalidParameter(
            f"{said}: name one as look, or in the prompt: {looks_named()}",
            details={"field": "look", "looks": list(LOOK_NAMES)},
        )
    return looks[name], "prompt"


async def edit_photo(
    backend: Backend, item: PhotoToEdit, params: EditParams, endpoint: EditEndpoint | None
) -> tuple[EditedPhoto, str | None]:
    """The editor at work on ``item``: the operator's images endpoint over HTTP (``model=external``), InstructPix2Pix
    or FLUX.2 [klein] in the Renderer, else the LOOK engine in a worker thread; and a note on the prompt."""
    if endpoint is not None:
        return await EndpointEditor(endpoint, run_in_worker).edit(item), None
    if params.model in RENDERED_EDITORS:
        return await _redrawn(backend, item, params, RENDERED_EDITORS[params.model])
    return await run_in_worker(LookEditor().edit, item), None


async def _redrawn(
    backend: Backend, item: PhotoToEdit, params: EditParams, editor: RenderedEditor
) -> tuple[EditedPhoto, str | None]:
    """A Renderer editor at its size (the long side ``side_px``, each side on its kind's grid) by the prompt's
    English words, the answer back at the photo's size."""
    words = await english_prompt(backend, item.prompt or "", "an instruction that says how to change the photo")
    if words.text is None:
        raise InvalidParameter(f"{words.note}: {editor.title} reads English; write the prompt in English")
    height, width = item.rgb.shape[:2]
    scale = editor.side_px_in(backend.manifest) / max(height, width)
    min_side_px, multiple_px = side_grid(editor.kind)
    size_w, size_h = (max(min_side_px, round(side * scale / multiple_px) * multiple_px) for side in (width, height))
    small = await run_in_worker(functools.partial(cv2.resize, item.rgb, (size_w, size_h), interpolation=cv2.INTER_AREA))
    request = RenderRequest(
        prompt=words.text,
        kind=editor.kind,
        model=editor.model,
        image=small,
        width=size_w,
        height=size_h,
        steps=params.steps,
        guidance=editor.guidance,
        seed=item.seed,
        deadline_unix_s=deadline_unix_s(),
    )
    done = await backend.call(RENDER, request, on_progress=RenderSteps().plan(item.seed, request.steps_to_run))
    back = await run_in_worker(
        functools.partial(cv2.resize, done.image, (width, height), interpolation=cv2.INTER_CUBIC)
    )
    return EditedPhoto(back, done.engines[0]), words.note


async def run(backend: Backend, data: bytes, params: EditParams, context: JobContext) -> JobResult:
    endpoint = require_endpoint(context.edit_endpoint) if params.model == EXTERNAL else None
    look, chosen_by = chosen_look(params) if params.model is None else (None, None)
    timings = Timings()
    with timings.phase("decode"):
        source = await decode_upload(data, context.limits, EDIT_OUTPUT)
    if params.model is not None:  # a neural editor redraws the photo, or another's server sees it: the gate first
        with timings.phase("compliance"):
            await require_compliant(backend, source.rgb, "generative", context)
    with timings.phase("analyze"):
        faces, gray = await asyncio.gather(backend.call(ANALYZE_FACES, source.rgb), run_in_worker(is_gray, source.rgb))
    chosen = select_faces(faces, source.width, source.height, RESTORE_DEFAULTS)
    if params.scope == "face" and not chosen:
        raise NoFaceFound("scope=face needs a face, and none was found; send scope=whole to style the whole photo")
    base, engines = await _restored(backend, source.rgb, chosen, params, gray, timings)
    with timings.phase("edit"):
        edited, prompt_note = await edit_photo(
            backend, PhotoToEdit(base, params.prompt, look, params.seed), params, endpoint
        )
    with timings.phase("compose"):
        result = await run_in_worker(_compose, base, edited.rgb, chosen, params, look is not None)
    with timings.phase("identity"):
        before = [judged_face(base, face) for face in chosen]
        after = [judged_face(result, face) for face in chosen]
        identities = await report_identities(backend, before, after, params.min_identity)
    edit = {"scope": params.scope, "restored": bool(chosen)}
    if endpoint is not None:  # its host and model, never its key
        edit |= {"endpoint": endpoint.host, "model": endpoint.model}
    if look is not None:
        edit |= {"look": look.name, "chosen_by": chosen_by}
    if params.model in RENDERED_EDITORS:
        edit |= {"model": RENDERED_EDITORS[params.model].model, "prompt_note": prompt_note}
    return await encode_job_result(
        params if look is None else params.model_copy(update={"look": look.name}),
        source,
        result,
        engines + [edited.engine],
        faces=len(chosen),
        timings=timings,
        fallback_engine=edited.engine.engine,
        report={"edit": edit},
        identity=identities.lowest(),
    )


async def _restored(
    backend: Backend, rgb: np.ndarray, faces: Sequence[Face], params: EditParams, gray: bool, timings: Timings
) -> tuple[np.ndarray, list[EngineInfo]]:
    """The photo with its faces restored (the restore job's own steps), or as it came (``restore=false``, no face)."""
    if not params.restore or not faces:
        return rgb, []
    model = await default_restore_model(backend)
    restored = await restore_faces(backend, rgb, faces, RESTORE_DEFAULTS, model, gray, timings)
    return restored.rgb, restored.engines


def _compose(
    base: np.ndarray, styled: np.ndarray, faces: Sequence[Face], params: EditParams, looked: bool
) -> np.ndarray:
    """The edit laid over ``base`` by scope, strength and ``identity_keep``; a film look over the whole photo
    (``looked``) keeps each face's own fine detail (``keep_face_detail``)."""
    mask = face_mask(base.shape[:2], faces) if faces else None
    if looked and params.scope == "whole" and mask is not None:
        styled = keep_face_detail(base, styled, faces, mask)
    return compose_edit(
        base,
        styled,
        strength=params.strength,
        region=mask if params.scope == "face" else None,
        face=mask,
        identity_keep=params.identity_keep,
    )
