"""What the service offers: the jobs (``/v1/tasks``), the models (``/v1/models``), the ID-photo standards, the
cartoon styles, the film looks, the portrait styles and the ID photo's attire templates.

(No ``from __future__ import annotations`` here: FastAPI resolves the route annotations at run time.)
"""

from fastapi import APIRouter, Request

from deployments.cartoon.types import CARTOON_DEPLOYMENTS
from deployments.edit.looks import default_looks
from deployments.idphoto.attire import default_attire_templates
from deployments.portrait.styles import default_styles
from serve_app.app_state import health_reports, settings_of
from serve_app.instructions.vocabulary import enum_values
from serve_app.jobs import job_context
from serve_app.openai_api import openai_model_list
from serve_app.registry import JOB_ENTRIES

router = APIRouter()


@router.get("/v1/tasks", tags=["jobs"])
async def list_tasks() -> dict:
    """Every job (the registry): its synchronous route, its names in English and Chinese (what the web page shows),
    whether it takes a video (``frames``: frame by frame through ``POST /v1/jobs`` or a bucket route, into
    ``video/mp4``), the whole job it is a step of (``step_of``: ``idphoto-matte`` of ``idphoto``; null for a whole
    job), whether the page offers it (``on_page``) and the values of its ``model`` option in the order of preference
    (``models``), each with the options only it reads (``options``: CodeFormer's ``fidelity``)."""
    return {
        "tasks": [
            {
                "name": entry.name,
                "route": entry.route,
                "title": dict(zip(("en", "zh"), entry.title)),
                "frames": entry.frames,
                "step_of": entry.step_of,
                "on_page": entry.on_page,
                "models": [
                    {"name": model, "options": list(entry.params_model.options_of_model(model))}
                    for model in enum_values(entry.params_model, "model")
                ],
            }
            for entry in JOB_ENTRIES
        ]
    }


@router.get("/v1/models", tags=["operations"])
async def list_models(request: Request) -> dict:
    """Every model in the manifest, with the state the serving replicas see (``models``), and the same as an
    OpenAI model list (``data``: the ids a client may send as ``model``)."""
    deployments = await health_reports(request)
    seen = {model["name"]: model for report in deployments.values() for model in report.get("models", [])}
    context = job_context(settings_of(request))
    manifest = context.manifest
    return openai_model_list(manifest, context) | {
        "models": [
            {
                "name": spec.name,
                "task": spec.task,
                "architecture": spec.architecture,
                "description": spec.description,
                "license": spec.license,
                "url": spec.url,
                "sha256": spec.sha256,
                "builtin": spec.builtin,
                "state": seen.get(spec.name, {}).get("state", "not-loaded"),
            }
            for spec in manifest.values()
        ]
    }


@router.get("/v1/idphoto/specs", tags=["jobs"])
async def idphoto_specs(request: Request) -> dict:
    """The ID-photo standards (``configs/id_specs.yaml``): size, DPI, head-height and top-margin ranges."""
    return {"specs": [spec.to_json() for spec in job_context(settings_of(request)).id_specs.values()]}


@router.get("/v1/cartoon/styles", tags=["jobs"])
async def cartoon_styles(request: Request) -> dict:
    """Every cartoon style, with the engine each of its models runs on (``dctnet`` or a non-neural fallback)."""
    reports = await health_reports(request)
    heads = reports.get(CARTOON_DEPLOYMENTS["head"], {}).get("styles", {})
    backgrounds = reports.get(CARTOON_DEPLOYMENTS["background"], {}).get("styles", {})
    return {
        "styles": [
            {
                "name": style,
                "engine": backgrounds.get(style, {}).get("engine", "unknown"),
                "head_engine": heads.get(style, {}).get("engine", "unknown"),
            }
            for style in job_context(settings_of(request)).cartoon_styles
        ]
    }


@router.get("/v1/edit/looks", tags=["jobs"])
async def edit_looks() -> dict:
    """Every film look of the edit job (``configs/looks.yaml``): its name (the ``look`` option) and its titles in
    Chinese and English. The LOOK engine runs them all on a CPU: no weights."""
    return {"looks": [{**look.to_json(), "engine": "look"} for look in default_looks().values()]}


@router.get("/v1/portrait/styles", tags=["jobs"])
async def portrait_styles() -> dict:
    """Every style of the portrait job (``configs/portrait_styles.yaml``): its name (the ``style`` option), its titles
    in Chinese and English, its size, steps, ControlNet scales and LoRAs. The Renderer draws them all."""
    return {"styles": [style.to_json() for style in default_styles().values()]}


@router.get("/v1/idphoto/attire", tags=["jobs"])
async def idphoto_attire() -> dict:
    """Every attire template of the ID photo (the ``attire`` option): the built-ins, drawn by code, and those of
    ``configs/attire/``: name, titles in Chinese and English, colours (``attire_color``) and the tiers that draw it
    (0: the template, on a CPU)."""
    return {"attire": [template.to_json() for template in default_attire_templates().values()]}
