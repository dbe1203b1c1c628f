"""The job registry and the restorers of the manifest are the only lists: everything that names a job or a restorer
is derived from them or held to them here (the page, the lexicon, the Serve YAMLs, the prompts, OpenAPI)."""

from __future__ import annotations

import ast
import dataclasses
import json
import re
from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient
from ray.serve._private.build_app import build_app as build_serve_app

from deployments.common.errors import InternalError, ModelUnavailable
from deployments.common.image import MEDIA_TYPES
from deployments.common.params import JobParams
from deployments.common.weights import ModelSpec, load_manifest
from deployments.restore.architecture import Architecture, declared_traits, restorer_architecture
from deployments.restore.params import (
    FIDELITY_MODELS,
    RESTORE_MODELS,
    RestoreParams,
    restorer_deployment,
    restorer_specs,
)
from serve_app.app import AppArgs, build_app
from serve_app.instructions import InstructionUnclear, LlmInterpreter, LlmOptions, RuleInterpreter
from serve_app.instructions.vocabulary import build_vocabulary, enum_values, load_lexicon
from serve_app.jobs import JOBS, job_context
from serve_app.openai_api import openai_model_list
from serve_app.registry import JOB_ENTRIES, JOB_NAMES, PAGE_JOBS, WHOLE_JOBS, job_of, result_extension
from serve_app.routes import create_api
from serve_app.schemas import ResultMeta
from serve_app.settings import Settings

REPO_ROOT = Path(__file__).resolve().parents[2]
WEB = REPO_ROOT / "serve_app" / "web"


@pytest.fixture(scope="module")
def manifest() -> dict[str, ModelSpec]:
    return load_manifest(Settings().models_manifest)


@pytest.fixture(scope="module")
def built_deployments() -> set[str]:
    return {deployment.name for deployment in build_serve_app(build_app({}), name="portrait").deployments}


# --- jobs ----------------------------------------------------------------------------------------------------------


def test_every_entry_has_its_orchestration_module():
    assert list(JOBS) == list(JOB_NAMES)
    for entry in JOB_ENTRIES:
        kind = JOBS[entry.name]
        assert kind.parse.__module__ == kind.run.__module__ == entry.module
        assert (
            entry.module == f"serve_app.jobs.{entry.step_of}_steps" if entry.step_of else f"serve_app.jobs.{entry.name}"
        )


def test_every_output_format_a_job_accepts_is_one_of_its_result_media_types():
    for entry in JOB_ENTRIES:
        formats = {value for value in enum_values(entry.params_model, "format") if value != "auto"}
        if formats:
            assert {MEDIA_TYPES[fmt] for fmt in formats} == set(entry.photo_media_types), entry.name
        else:  # a job without a format option (a step; identity's JSON answer) answers one media type
            assert len(entry.result_media_types) == 1, entry.name
        assert set(entry.result_media_types) - set(entry.photo_media_types) == (
            {"video/mp4"} if entry.frames else set()
        )
        for media_type, extension in entry.result_media_types.items():
            assert result_extension(media_type) == extension


def test_a_result_names_its_job_from_the_registry_not_from_the_job_module():
    """Each entry has its own params model, so ``job_of(params)`` is the job a result belongs to; the job modules
    pass ``encode_job_result`` / ``build_meta`` no name of their own. Left: ``idphoto_steps.py`` still spells
    ``f"idphoto-{step}"`` (being rewritten by its owner)."""
    context = job_context(Settings())
    for entry in JOB_ENTRIES:
        assert job_of(JOBS[entry.name].parse({}, context)) is entry
    with pytest.raises(InternalError, match="no job's params model"):
        job_of(JobParams())
    spelled = set()
    for path in (REPO_ROOT / "serve_app" / "jobs").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            named = isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("encode_job_result", "build_meta")
            if named and node.args and isinstance(node.args[0], ast.Constant | ast.JoinedStr):
                spelled.add(path.name)
    assert spelled <= {"idphoto_steps.py"}


def test_the_wire_literals_are_the_registrys_job_names():
    schema = ResultMeta.model_json_schema()["properties"]["job"]
    assert schema["enum"] == list(JOB_NAMES)


def test_every_job_route_and_its_openapi_text_come_from_the_registry():
    paths = TestClient(create_api()).get("/openapi.json").json()["paths"]
    for entry in JOB_ENTRIES:
        operation = paths[entry.route]["post"]
        assert operation["description"] == entry.description
        media_types = set(operation["responses"]["200"]["content"])
        assert media_types == {*entry.photo_media_types, "application/json"}  # return=json; a video is a job's
        options = operation["requestBody"]["content"]["application/json"]["schema"]["properties"]
        assert set(options) - {"image_b64"} == set(entry.params_model.model_json_schema(by_alias=True)["properties"])


def test_the_lexicon_names_every_job_and_only_those():
    assert set(load_lexicon().tasks) == set(JOB_NAMES)


def test_the_prompts_name_every_job():
    context = job_context(Settings())
    vocabulary = build_vocabulary(context)
    rules = RuleInterpreter(vocabulary, context)
    llm = LlmInterpreter(LlmOptions(base_url="http://127.0.0.1:9/v1", model="m"), rules, vocabulary, context)
    prompt = llm.system_prompt()
    assert all(f"{entry.name} = {entry.prompt_hint}" in prompt for entry in JOB_ENTRIES)
    with pytest.raises(InstructionUnclear, match="names no job") as refused:
        rules.interpret_now("hello there")
    assert all(entry.example_words in str(refused.value) for entry in JOB_ENTRIES)


def test_the_web_page_offers_every_whole_job_at_its_route():
    """The steps of a job (``step_of``) and the jobs marked ``on_page=False`` are API-only: the page runs whole
    jobs."""
    common = (WEB / "common.js").read_text(encoding="utf-8")
    routes = re.search(r"const ROUTES = (\{.*?\});", common, re.DOTALL).group(1)
    whole = {entry.name: entry.route for entry in JOB_ENTRIES if entry.name in PAGE_JOBS}
    assert json.loads(re.sub(r"(\w+):", r'"\1":', routes)) == whole
    radios = re.findall(r'<input type="radio" name="job" value="([a-z_-]+)"', (WEB / "index.html").read_text("utf-8"))
    assert radios == list(PAGE_JOBS) and not {name for name in PAGE_JOBS if name.startswith("idphoto-")}


def test_the_web_page_names_each_job_by_its_registry_title():
    """GET /v1/tasks serves the titles; the page has no names of its own for the jobs (no ``job.<name>`` strings,
    empty radio labels that ``renderJobTitles`` fills; ``tests/unit/serve_app/test_webpage_tasks.py`` runs it)."""
    tasks = TestClient(create_api()).get("/v1/tasks").json()["tasks"]
    assert {task["name"]: tuple(task["title"].values()) for task in tasks} == {e.name: e.title for e in JOB_ENTRIES}
    strings = (WEB / "i18n.js").read_text(encoding="utf-8")
    assert not [name for name in JOB_NAMES if f'"job.{name}"' in strings]
    labels = re.findall(r'name="job" value="[a-z_-]+"[^>]*> <span class="job-title">([^<]*)</span>', _page())
    assert labels == [""] * len(PAGE_JOBS)


def _page() -> str:
    return (WEB / "index.html").read_text(encoding="utf-8")


def test_every_step_is_routed_under_its_whole_job_and_named_after_it():
    steps = [entry for entry in JOB_ENTRIES if entry.step_of is not None]
    assert [entry.route for entry in steps] == [
        f"/v1/idphoto/{step}" for step in ("matte", "crop", "background", "watermark", "layout", "filesize")
    ]
    for entry in steps:
        assert entry.step_of in WHOLE_JOBS and entry.name == f"{entry.step_of}-{entry.step}"
        assert set(entry.params_model.model_fields) <= set(JOBS[entry.step_of].entry.params_model.model_fields)


def test_every_deployment_a_job_calls_is_built_and_so_in_every_serve_yaml(built_deployments):
    """``tests/unit/test_configs.py`` holds every Serve YAML to the built deployments."""
    for entry in JOB_ENTRIES:
        assert set(entry.deployments) <= built_deployments, entry.name


# --- restorers -----------------------------------------------------------------------------------------------------


def test_the_restorers_offered_are_the_manifests_in_its_order(manifest):
    restorers = restorer_specs(manifest)
    assert RESTORE_MODELS == tuple(spec.name for spec in restorers)
    assert enum_values(RestoreParams, "model") == RESTORE_MODELS
    assert AppArgs().restore_models == list(RESTORE_MODELS)
    cards = openai_model_list(manifest, job_context(Settings()))["data"]
    assert [card["id"] for card in cards if card["task"] == "restore" and card["params"]] == list(RESTORE_MODELS)
    tasks = TestClient(create_api()).get("/v1/tasks").json()["tasks"]  # what the web page offers, in order
    assert [model["name"] for model in tasks[0]["models"]] == list(RESTORE_MODELS) and tasks[0]["name"] == "restore"


def test_the_restorers_that_take_fidelity_are_the_ones_whose_architecture_says_so(manifest):
    """The options side reads ``RESTORER``'s declaration from source (no torch in the ingress): the same traits as
    the imported ``Architecture``; the fidelity option and the page's slider follow them."""
    for spec in restorer_specs(manifest):
        architecture = restorer_architecture(spec)
        declared = {name: getattr(architecture, name) for name in declared_traits(spec)}
        assert declared == {
            field.name: getattr(architecture, field.name)
            for field in dataclasses.fields(Architecture)
            if field.name != "load" and getattr(architecture, field.name) != field.default
        }, spec.name
        takes = architecture.takes_fidelity
        assert (spec.name in FIDELITY_MODELS, RestoreParams.options_of_model(spec.name)) == (
            takes,
            ("fidelity",) * takes,
        )


def test_every_restorer_has_an_architecture_and_one_deployment_in_the_app(manifest, built_deployments):
    for spec in restorer_specs(manifest):
        assert isinstance(restorer_architecture(spec), Architecture), spec.name
        assert restorer_deployment(spec) in built_deployments
    names = [restorer_deployment(spec) for spec in restorer_specs(manifest)]
    assert len(set(names)) == len(names)


def test_a_model_that_is_not_a_face_restorer_is_refused(manifest):
    with pytest.raises(ModelUnavailable, match="not a face restorer"):
        restorer_architecture(manifest["realesrgan-x4plus"])
    with pytest.raises(ModelUnavailable, match="names no deployment"):
        restorer_deployment(ModelSpec("x", "face_restoration", "gpen", "gpen", "x.pth", "https://x", "MIT"))


def test_the_shipped_serve_yamls_list_each_restorer_under_its_manifest_deployment_name(manifest):
    """One name per deployment: the YAML entry is the manifest's ``deployment`` (also /healthz's and the metrics')."""
    for relative in ("configs/local.yaml", "configs/gpu.yaml", "configs/cluster-cpu.yaml"):
        config = yaml.safe_load((REPO_ROOT / relative).read_text(encoding="utf-8"))
        names = {deployment["name"] for deployment in config["applications"][0]["deployments"]}
        assert {restorer_deployment(spec) for spec in restorer_specs(manifest)} <= names, relative
