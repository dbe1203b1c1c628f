"""The official post-processing without torch, the predictor's batching and its answers without weights."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from deployments.colorize.params import COLORIZE_MODELS
from deployments.colorize.pipeline import gray_input, join_color, nearest_indices
from deployments.colorize.predictor import ColorizationPredictor
from deployments.colorize.types import PhotoToColorize
from deployments.common.batching import ItemFailure, run_per_item
from deployments.common.errors import InvalidParameter, ModelUnavailable
from deployments.common.weights import ModelStore, load_manifest
from tests.ddcolor_samples import randomized_ddcolor

REPO_ROOT = Path(__file__).resolve().parents[3]
TINY = "ddcolor_paper_tiny"


def test_the_manifest_offers_the_four_released_models_default_first() -> None:
    assert COLORIZE_MODELS == ("ddcolor_modelscope", "ddcolor_artistic", "ddcolor_paper", "ddcolor_paper_tiny")


@pytest.mark.parametrize(("in_size", "out_size"), [(512, 437), (512, 1920), (64, 3000), (512, 1024), (512, 512)])
def test_nearest_indices_are_torchs(in_size: int, out_size: int) -> None:
    source = torch.arange(in_size, dtype=torch.float32)[None, None, None, :]
    expected = F.interpolate(source, size=(1, out_size))[0, 0, 0].long().numpy()
    np.testing.assert_array_equal(nearest_indices(in_size, out_size), expected)


def test_join_color_is_the_official_torch_resize_and_lab_join(astronaut_rgb: np.ndarray) -> None:
    import cv2

    photo = cv2.resize(astronaut_rgb, (301, 457))
    ab = np.random.default_rng(0).uniform(-60, 60, (2, 64, 64)).astype(np.float32)
    lightness = cv2.cvtColor((photo / 255.0).astype(np.float32), cv2.COLOR_RGB2Lab)[:, :, :1]
    ab_full = F.interpolate(torch.from_numpy(ab)[None], size=(457, 301))[0].numpy().transpose(1, 2, 0)
    rgb = cv2.cvtColor(np.concatenate([lightness, ab_full], axis=-1), cv2.COLOR_LAB2RGB)
    np.testing.assert_array_equal(join_color(photo, ab), (rgb * 255.0).round().astype(np.uint8))
    gray = cv2.cvtColor(cv2.cvtColor(photo, cv2.COLOR_RGB2GRAY), cv2.COLOR_GRAY2RGB)
    assert np.abs(join_color(gray, np.zeros_like(ab)).astype(int) - gray).max() <= 1  # no colour in, none out


def test_gray_input_is_the_lightness_alone(astronaut_rgb: np.ndarray) -> None:
    x = gray_input(astronaut_rgb, 64)
    assert x.shape == (3, 64, 64) and x.dtype == np.float32
    assert np.abs(x[0] - x[1]).max() < 1e-5 and np.abs(x[1] - x[2]).max() < 1e-5
    with pytest.raises(InvalidParameter, match="multiple of 32"):
        gray_input(astronaut_rgb, 100)


@pytest.fixture(scope="module")
def tiny_store(tmp_path_factory: pytest.TempPathFactory) -> ModelStore:
    """A store holding a random DDColor-T in the released layout under the manifest's ddcolor_paper_tiny file."""
    root = tmp_path_factory.mktemp("colorize_store")
    manifest = load_manifest(REPO_ROOT / "configs" / "models.yaml")
    path = root / manifest[TINY].file
    path.parent.mkdir(parents=True)
    torch.save({"params": randomized_ddcolor("tiny").state_dict()}, path)
    return ModelStore(root, manifest)


def test_predictor_batches_by_model_and_size_and_matches_the_network(
    tiny_store: ModelStore, astronaut_rgb: np.ndarray
) -> None:
    predictor = ColorizationPredictor(tiny_store)
    jobs = [PhotoToColorize(gray_input(astronaut_rgb, size), TINY) for size in (64, 32, 64)]
    results = predictor.predict(jobs)
    assert [r.ab.shape for r in results] == [(2, 64, 64), (2, 32, 32), (2, 64, 64)]
    assert results[0].engine.engine == "ddcolor" and results[0].engine.weights == TINY
    np.testing.assert_array_equal(results[0].ab, results[2].ab)
    network = randomized_ddcolor("tiny")
    with torch.inference_mode():
        expected = network(torch.from_numpy(jobs[1].gray)[None])[0].numpy()
    np.testing.assert_allclose(results[1].ab, expected, atol=1e-4)


def test_absent_weights_fail_only_their_items_with_the_fetch_command(
    tiny_store: ModelStore, astronaut_rgb: np.ndarray
) -> None:
    predictor = ColorizationPredictor(tiny_store)
    gray = gray_input(astronaut_rgb, 32)
    outcomes = run_per_item(
        predictor.predict,
        [
            PhotoToColorize(gray, "ddcolor_modelscope"),
            PhotoToColorize(gray, TINY),
            PhotoToColorize(gray[:, :, :16], TINY),
        ],
        predictor.admit,
        "Colorizer",
    )
    missing, done, refused = outcomes
    assert isinstance(missing, ItemFailure) and isinstance(missing.error, ModelUnavailable)
    assert missing.error.details["fix"] == "portrait models pull ddcolor_modelscope"
    assert "portrait models pull ddcolor_modelscope" in missing.error.message
    assert done.ab.shape == (2, 32, 32)
    assert isinstance(refused, ItemFailure) and isinstance(refused.error, InvalidParameter)
    with pytest.raises(InvalidParameter, match="unknown colorization model 'gpen-bfr-512'"):
        predictor.admit(PhotoToColorize(gray, "gpen-bfr-512"))
