"""The edit job's neural editor, InstructPix2Pix on SDXL in the Renderer, on a tiny random model pulled from a folder
mirror under the shipped name: the answer names it, random weights move the face until the identity judge refuses,
and ``identity_keep=1`` brings the face back."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient

pytest.importorskip("diffusers")

from deployments.common.download import pull  # noqa: E402
from deployments.common.image import encode_image  # noqa: E402
from deployments.common.weights import ModelStore, load_manifest  # noqa: E402
from serve_app.local_backend import in_process_backend  # noqa: E402
from serve_app.routes import create_api  # noqa: E402
from serve_app.settings import Settings  # noqa: E402
from tests.conftest import REPO_ROOT  # noqa: E402
from tests.unit.render.tiny_sdxl import as_shipped, build_mirror  # noqa: E402

EDITOR = "sdxl-instructpix2pix-768"


def _client(store: ModelStore) -> TestClient:
    app = create_api()
    app.state.backend = in_process_backend(store)
    app.state.settings = Settings()
    return TestClient(app, raise_server_exceptions=False)


@pytest.fixture(scope="module")
def client(builtin_store, tmp_path_factory) -> TestClient:
    mirror = tmp_path_factory.mktemp("mirror")
    build_mirror(mirror)
    root = tmp_path_factory.mktemp("stores") / "instruct"
    root.mkdir()
    for child in builtin_store.iterdir():
        (root / child.name).symlink_to(child)
    store = ModelStore(str(root), load_manifest(as_shipped(mirror, REPO_ROOT / "configs" / "models.yaml")))
    assert [outcome.error for outcome in pull(store, [EDITOR], mirror=str(mirror))] == [None]
    return _client(store)


@pytest.fixture(scope="module")
def portrait_png(astronaut_rgb) -> bytes:
    return encode_image(np.ascontiguousarray(astronaut_rgb[:300, 80:380]), "png")


def edit(client: TestClient, photo: bytes, **fields):
    data = {"model": "instructpix2pix", "prompt": "make it a red portrait", "steps": "2", "return": "json", **fields}
    return client.post("/v1/edit", files={"image": ("me.png", photo, "image/png")}, data=data)


def test_the_answer_names_instructpix2pix_and_keeps_the_photos_size(client, portrait_png):
    answer = edit(client, portrait_png, identity_keep="1")
    assert answer.status_code == 200, answer.text
    meta = answer.json()["meta"]
    assert "diffusers-sdxl-instructpix2pix" in meta["engine"].split("+")
    assert EDITOR in {weights["name"] for weights in meta["weights"]}
    assert (meta["width"], meta["height"]) == (300, 300)
    assert meta["report"]["edit"]["model"] == EDITOR
    assert "compliance" in meta["timings_ms"]  # a neural editor redraws the photo: the gate saw it first


def test_random_weights_move_the_face_and_the_judge_refuses_without_identity_keep(client, portrait_png):
    answer = edit(client, portrait_png, identity_keep="0", min_identity="0.7")
    assert answer.status_code == 422 and answer.json()["error"]["code"] == "identity_changed", answer.text


def test_identity_keep_brings_the_persons_face_back(client, portrait_png):
    answer = edit(client, portrait_png, identity_keep="1", min_identity="0.7")
    assert answer.status_code == 200, answer.text
    assert answer.json()["meta"]["identity"]["same_person"] is True


def test_chinese_words_without_a_language_model_are_a_422_asking_for_english(client, portrait_png):
    answer = edit(client, portrait_png, prompt="把背景换成海边")
    assert answer.status_code == 422 and "English" in answer.json()["error"]["message"], answer.text


def test_without_the_weights_the_answer_names_the_pull_command(builtin_store, portrait_png):
    store = ModelStore(str(builtin_store), load_manifest(REPO_ROOT / "configs" / "models.yaml"))
    answer = edit(_client(store), portrait_png)
    assert answer.status_code == 503 and f"portrait models pull {EDITOR}" in answer.json()["error"]["message"]
