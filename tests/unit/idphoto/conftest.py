"""Fixtures for the ID-photo tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from idphoto_samples import SyntheticPortrait, draw_portrait

from deployments.common.weights import ModelStore, load_manifest
from deployments.idphoto.specs import default_specs

REPO_ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def portrait() -> SyntheticPortrait:
    return draw_portrait()


@pytest.fixture(scope="session")
def specs():
    return default_specs()


@pytest.fixture(scope="session")
def model_store(mediapipe_dir) -> ModelStore:
    """The store with the built-in models (MediaPipe and MODNet) that ``portrait models pull --builtin`` fills."""
    store = ModelStore(mediapipe_dir.parent, load_manifest(REPO_ROOT / "configs" / "models.yaml"))
    if not store.status("modnet").usable:
        pytest.fail(f"MODNet is missing under {mediapipe_dir.parent}: run `portrait models pull --builtin`")
    return store


@pytest.fixture(scope="session")
def matter(model_store):
    from deployments.idphoto.predictor import MattingPredictor

    return MattingPredictor.from_store(model_store)
