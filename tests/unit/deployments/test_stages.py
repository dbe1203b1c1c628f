"""A model stage is declared once, beside its deployment: every ``StageCall`` a job may make reaches a method its
stage declares, every declared method exists where the call lands, and a ``deployment.py`` keeps only what Ray's own
examples keep."""

from __future__ import annotations

import sys

import pytest

from deployments.common.stage import StageCall, StageContext
from deployments.common.weights import load_manifest
from deployments.restore.params import RESTORE_MODELS
from serve_app.stages import bindings, model_deployments, stage_of
from tests.conftest import REPO_ROOT

CONTEXT = StageContext(load_manifest(REPO_ROOT / "configs" / "models.yaml"), RESTORE_MODELS)


def declared_calls() -> dict[str, StageCall]:
    """Every module-level ``StageCall`` of the ``deployments`` packages (the stages' modules are imported)."""
    model_deployments()
    return {
        f"{module_name}.{name}": value
        for module_name, module in list(sys.modules.items())
        if module_name.startswith("deployments.")
        for name, value in vars(module).items()
        if isinstance(value, StageCall) and not name.startswith("_")
    }


def test_the_stages_found_are_every_replica_of_every_deployment_file():
    folders = {path.parent.name for path in (REPO_ROOT / "deployments").glob("*/deployment.py")} - {"common"}
    found = {deployment.func_or_class.__module__.split(".")[1] for deployment in model_deployments()}
    assert found == folders
    assert {"FaceAnalyzer", "PortraitMatter", "FaceRestorer", "BackgroundUpscaler", "Colorizer"} <= {
        stage_of(deployment).name for deployment in model_deployments()
    }


@pytest.mark.parametrize("where", sorted(declared_calls()))
def test_every_declared_call_reaches_a_method_its_stage_declares(where):
    call = declared_calls()[where]
    stages = {stage_of(deployment).name: stage_of(deployment) for deployment in model_deployments()}
    bound = {name: stage_of(deployment) for name, deployment, _ in bindings(CONTEXT)}
    stage = bound.get(call.deployment) or stages.get(call.deployment)  # FaceRestorer: each binding via .at()
    assert stage is not None, f"{where} names {call.deployment}, which no stage declares"
    assert stage.reaches(call), f"{where}: {stage.name} declares no {'batched' if call.batched else 'query'} {call}"


def test_every_declared_method_is_where_the_calls_land():
    """A batched name is the deployment's ``@serve.batch`` method (checked when the class is defined) and the
    predictor's batch function; a query is a predictor method."""
    for deployment in model_deployments():
        stage = stage_of(deployment)
        predictor_type = stage.predictor if isinstance(stage.predictor, type) else None
        for method in (*stage.batched, *stage.queries):
            if predictor_type is not None:
                assert callable(getattr(predictor_type, method, None)), f"{predictor_type.__name__}.{method}"


def test_restorers_are_bound_in_the_apps_order_of_preference():
    names = [name for name, deployment, _ in bindings(CONTEXT) if stage_of(deployment).name == "FaceRestorer"]
    assert names == [CONTEXT.manifest[model].deployment for model in RESTORE_MODELS]


def test_a_deployment_file_is_the_size_of_rays_examples():
    for path in sorted((REPO_ROOT / "deployments").glob("*/deployment.py")):
        if path.parent.name == "common":
            continue
        stages = path.read_text(encoding="utf-8").count("(ModelReplica):")
        lines = len(path.read_text(encoding="utf-8").splitlines())
        assert stages >= 1 and lines <= 40 * stages, f"{path}: {lines} lines for {stages} stage(s)"


def test_every_stage_class_survives_the_trip_serve_gives_it():
    """Serve ships a deployment's class to its replica by value (cloudpickle rebuilds it from an empty skeleton)."""
    from ray import cloudpickle

    for deployment in model_deployments():
        rebuilt = cloudpickle.loads(cloudpickle.dumps(deployment.func_or_class))
        assert rebuilt.stage == stage_of(deployment)
