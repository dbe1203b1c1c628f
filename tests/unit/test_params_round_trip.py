"""Every job's params survive their own dump (#32 finding 13): records and ``meta.params`` store them with their
defaults, the backfill forwards them to the service, ``/v1/instructions`` answers them for ``POST /v1/{task}``, and
each of those validates again into the same params. ``IdPhotoParams`` refused its own defaults (``canvas_dpi`` beside
``layout=none``), so the README's backfill failed every ID photo."""

from __future__ import annotations

from typing import Any

import pytest

from deployments.common.params import JobParams
from serve_app.instructions import Instruction
from serve_app.jobs import JobContext, job_context, parse_job_params
from serve_app.registry import JOB_ENTRIES, JobEntry
from serve_app.settings import Settings

# What a job needs at the least (every job takes none today); a job that comes to need a field names it here.
MINIMAL: dict[str, dict[str, Any]] = {}
# Options that exclude others, set: their dumps carry the excluded ones at their defaults.
SET: dict[str, list[dict[str, Any]]] = {
    "idphoto": [
        {"spec": "us-passport"},
        {"spec": "cn-1inch", "layout": "6inch", "cut_lines": True},
        {"layout": "custom", "canvas_width_mm": 102, "canvas_height_mm": 152},
        {"width_mm": 35, "height_mm": 45, "dpi": 600, "hd": True, "hd_dpi": 600},
        {"background": "transparent", "format": "png"},
        {"background_image": "studio-grey"},
    ],
    "idphoto-crop": [{"spec": "cn-1inch"}, {"width_px": 295, "height_px": 413}],
    "idphoto-layout": [{"layout": "a4"}, {"layout": "custom", "canvas_width_mm": 100, "canvas_height_mm": 150}],
    "idphoto-matte": [{"dpi": 350}],
    "restore": [{"upscale": 2, "format": "png"}],
}


@pytest.fixture(scope="module")
def context() -> JobContext:
    return job_context(Settings())


def _cases() -> list[tuple[JobEntry, dict[str, Any]]]:
    return [
        (entry, {**MINIMAL.get(entry.name, {}), **fields})
        for entry in JOB_ENTRIES
        for fields in [{}, *SET.get(entry.name, [])]
    ]


def _ids() -> list[str]:
    return [f"{entry.name}{'-' + '-'.join(fields) if fields else ''}" for entry, fields in _cases()]


@pytest.mark.parametrize("entry", JOB_ENTRIES, ids=[entry.name for entry in JOB_ENTRIES])
def test_every_jobs_params_validate_their_own_dump(entry):
    model = entry.params_model
    params = model.model_validate(MINIMAL.get(entry.name, {}))
    assert model.model_validate(params.model_dump(by_alias=True)) == params


@pytest.mark.parametrize(("entry", "fields"), _cases(), ids=_ids())
def test_every_path_that_stores_or_forwards_params_gets_the_same_params_back(context, entry, fields):
    try:
        params = parse_job_params(entry.name, fields, context)
    except Exception as exc:  # a case's own mistake, not the round trip's
        pytest.fail(f"{entry.name} {fields} does not validate to begin with: {exc}")
    dumps: dict[str, dict[str, Any]] = {
        "records and meta (defaults included)": params.model_dump(by_alias=True),
        "JSON records (defaults included)": params.model_dump(mode="json", by_alias=True),
        "the backfill's query (what was set)": params.model_dump(mode="json", by_alias=True, exclude_unset=True),
        "/v1/instructions and the OpenAI routes": Instruction(entry.name, params, "rules").fields(),
    }
    for path, dumped in dumps.items():
        again: JobParams = parse_job_params(entry.name, dumped, context)
        assert again == params, path
        assert entry.params_model.model_validate(dumped, context={"specs": context.id_specs}) == params, path
