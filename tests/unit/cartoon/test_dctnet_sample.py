"""Our reader + generator against TensorFlow's own output for the sample DCT-Net graph in ``../shared``."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from deployments.cartoon.dctnet import DctNet, load_dctnet, official_weight_shapes

MIN_WITHIN_ONE_PIXEL_FRAC = 0.999
MIN_BIT_EXACT_VALUE_FRAC = 0.99
CASES = ["rand_uniform_288", "rand_smooth_288", "astronaut_288"]


@pytest.fixture(scope="module")
def sample_dir(shared_dir: Path) -> Path:
    return shared_dir / "dctnet_graph_sample"


@pytest.fixture(scope="module")
def manifest(sample_dir: Path) -> dict:
    return json.loads((sample_dir / "manifest.json").read_text())


@pytest.fixture(scope="module")
def sample_model(sample_dir: Path, manifest: dict) -> DctNet:
    return load_dctnet(sample_dir / manifest["pb"])


def test_graph_file_is_the_documented_one(sample_dir: Path, manifest: dict) -> None:
    assert hashlib.sha256((sample_dir / manifest["pb"]).read_bytes()).hexdigest() == manifest["pb_sha256"]
    assert [case["name"] for case in manifest["cases"]] == CASES


def test_eps_read_from_the_sample_graph(sample_model: DctNet) -> None:
    assert sample_model.eps == pytest.approx(1e-2)


@pytest.mark.parametrize("case", CASES)
def test_reproduces_tensorflow_reference(sample_dir: Path, sample_model: DctNet, case: str) -> None:
    image_bgr = np.load(sample_dir / f"{case}.input.npy")
    reference = np.load(sample_dir / f"{case}.ref.npy")

    output = sample_model(image_bgr)

    assert output.shape == reference.shape and output.dtype == reference.dtype == np.uint8
    diff = np.abs(output.astype(np.int16) - reference.astype(np.int16))
    within_one_pixel_frac = float((diff.max(axis=-1) <= 1).mean())
    bit_exact_value_frac = float((diff == 0).mean())
    summary = (
        f"{case}: pixels within ±1 {within_one_pixel_frac:.6%}, bit-exact values {bit_exact_value_frac:.6%}, "
        f"max |diff| {diff.max()}"
    )
    assert within_one_pixel_frac >= MIN_WITHIN_ONE_PIXEL_FRAC, summary
    assert bit_exact_value_frac >= MIN_BIT_EXACT_VALUE_FRAC, summary


def test_weight_shapes_match_the_manifest(manifest: dict) -> None:
    assert {name: tuple(shape) for name, shape in manifest["weights"].items()} == official_weight_shapes()
