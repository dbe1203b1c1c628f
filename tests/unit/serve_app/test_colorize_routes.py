"""Colorization in-process: DDColor fetched through a model mirror, ``POST /v1/colorize``, ``colorize`` on restore,
and the answers without DDColor's weights (the FastAPI app over the local backend; no Ray)."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient
from PIL import Image

from deployments.colorize.pipeline import gray_input, join_color
from deployments.common.image import encode_image
from deployments.common.weights import ModelStore, load_manifest
from serve_app.backend import Backend
from serve_app.cli import main
from serve_app.local_backend import in_process_backend
from serve_app.routes import create_api
from serve_app.settings import Settings
from tests.ddcolor_samples import randomized_ddcolor

TINY = "ddcolor_paper_tiny"


def client_for(backend: Backend) -> TestClient:
    app = create_api()
    app.state.backend = backend
    app.state.settings = Settings()
    return TestClient(app, raise_server_exceptions=False)


def store_with_builtins(root: Path, builtin_store: Path) -> ModelStore:
    shutil.copytree(builtin_store, root, symlinks=True)
    return ModelStore(root, load_manifest(Settings().models_manifest))


@pytest.fixture(scope="module")
def mirrored_store(tmp_path_factory, builtin_store) -> ModelStore:
    """The built-ins plus DDColor-T (random weights, official layout) pulled by the CLI from a folder mirror."""
    mirror = tmp_path_factory.mktemp("mirror")
    file = load_manifest(Settings().models_manifest)[TINY].file
    (mirror / file).parent.mkdir(parents=True)
    torch.save({"params": randomized_ddcolor("tiny").state_dict()}, mirror / file)
    store = store_with_builtins(tmp_path_factory.mktemp("store") / "models", builtin_store)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PORTRAIT_MODELS_MIRROR", str(mirror))
        patch.setenv("PORTRAIT_MODEL_STORE", str(store.root))
        assert main(["models", "pull", TINY]) == 0
    assert store.status(TINY).usable
    return store


@pytest.fixture(scope="module")
def client(mirrored_store) -> TestClient:
    return client_for(in_process_backend(mirrored_store))


@pytest.fixture(scope="module")
def bare_client(tmp_path_factory, builtin_store) -> TestClient:
    """No DDColor weights at all."""
    return client_for(
        in_process_backend(store_with_builtins(tmp_path_factory.mktemp("bare") / "models", builtin_store))
    )


@pytest.fixture(scope="module")
def gray_portrait(astronaut_rgb) -> np.ndarray:
    small = cv2.resize(astronaut_rgb, (256, 256), interpolation=cv2.INTER_AREA)
    return cv2.cvtColor(cv2.cvtColor(small, cv2.COLOR_RGB2GRAY), cv2.COLOR_GRAY2RGB)


def rgb_of(body: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(body)).convert("RGB"))


def test_colorize_runs_the_mirrored_ddcolor_exactly_as_the_official_pipeline(client, gray_portrait):
    png = encode_image(gray_portrait, "png")
    answer = client.post("/v1/colorize", files={"image": ("old.png", png, "image/png")}, data={"input_size": "256"})
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-portrait-engine"] == "ddcolor"
    assert answer.headers["x-portrait-weights"].startswith(f"{TINY}@")
    network = randomized_ddcolor("tiny")
    with torch.inference_mode():
        ab = network(torch.from_numpy(gray_input(gray_portrait, 256))[None])[0].numpy()
    colored = rgb_of(answer.content)
    np.testing.assert_array_equal(colored, join_color(gray_portrait, ab))
    assert np.ptp(colored.astype(int), axis=2).mean() > 1.0  # colour where there was none
    lightness = cv2.cvtColor(colored, cv2.COLOR_RGB2Lab)[..., 0].astype(int)
    kept = np.abs(lightness - cv2.cvtColor(gray_portrait, cv2.COLOR_RGB2Lab)[..., 0])
    assert np.median(kept) <= 1  # the photo's own lightness (out-of-gamut colours clip a few pixels' L)


def test_colorize_as_json_names_the_model_it_chose(client, gray_portrait):
    png = encode_image(gray_portrait, "png")
    answer = client.post("/v1/colorize", files={"image": ("old.png", png, "image/png")}, data={"return": "json"})
    assert answer.status_code == 200, answer.text
    meta = answer.json()["meta"]
    assert (meta["job"], meta["engine"], meta["params"]["model"]) == ("colorize", "ddcolor", TINY)
    assert meta["params"]["input_size"] == 512 and set(meta["timings_ms"]) >= {"prepare", "colorize", "join"}


def test_without_weights_colorize_is_a_503_naming_the_fetch_command(bare_client, gray_portrait):
    png = encode_image(gray_portrait, "png")
    answer = bare_client.post("/v1/colorize", files={"image": ("old.png", png, "image/png")})
    assert answer.status_code == 503
    error = answer.json()["error"]
    assert error["code"] == "model_unavailable"
    assert "portrait models pull ddcolor_modelscope" in error["message"]


def test_restore_auto_colorizes_a_gray_photo(client, gray_portrait):
    png = encode_image(gray_portrait, "png")
    answer = client.post("/v1/restore", files={"image": ("old.png", png, "image/png")}, data={"colorize": "auto"})
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-portrait-engine"] == "classic-restore+ddcolor"
    assert answer.headers["x-portrait-colorized"] == "yes"
    assert np.ptp(rgb_of(answer.content).astype(int), axis=2).mean() > 1.0


def test_restore_auto_leaves_a_colour_photo_alone(client, astronaut_rgb):
    photo = cv2.resize(astronaut_rgb, (256, 256), interpolation=cv2.INTER_AREA)
    answer = client.post(
        "/v1/restore", files={"image": ("me.png", encode_image(photo, "png"), "image/png")}, data={"colorize": "auto"}
    )
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-portrait-engine"] == "classic-restore"
    assert answer.headers["x-portrait-colorized"] == "no: the photo is in colour"


def test_restore_auto_without_weights_stays_gray_and_says_why(bare_client, gray_portrait):
    png = encode_image(gray_portrait, "png")
    answer = bare_client.post(
        "/v1/restore", files={"image": ("old.png", png, "image/png")}, data={"colorize": "auto", "return": "json"}
    )
    assert answer.status_code == 200, answer.text
    meta = answer.json()["meta"]
    decision = meta["report"]["colorize"]
    assert (decision["colorized"], decision["fix"]) == (False, "portrait models pull ddcolor_modelscope")
    assert decision["tone"]["monochrome"] is True and meta["engine"] == "classic-restore"
    forced = bare_client.post("/v1/restore", files={"image": ("old.png", png, "image/png")}, data={"colorize": "true"})
    assert forced.status_code == 503 and forced.json()["error"]["code"] == "model_unavailable"
