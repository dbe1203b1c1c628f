"""The edit job's neural editors in the Renderer, InstructPix2Pix on SDXL and FLUX.2 [klein], each on a tiny random
model pulled from a folder mirror under its shipped name: the answer names it, random weights move the face until the
identity judge refuses, and ``identity_keep=1`` brings the face back."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient

pytest.importorskip("diffusers")

from deployments.common.download import pull  # noqa: E402
from deployments.common.image import encode_image  # noqa: E402
from deployments.common.weights import ModelStore, load_manifest  # noqa: E402
from deployments.edit.params import EditParams  # noqa: E402
from serve_app.jobs.context import job_context  # noqa: E402
from serve_app.jobs.edit import render_work  # noqa: E402
from serve_app.local_backend import in_process_backend  # noqa: E402
from serve_app.routes import create_api  # noqa: E402
from serve_app.settings import Settings  # noqa: E402
from tests.conftest import REPO_ROOT  # noqa: E402
from tests.unit.render.tiny_sdxl import as_shipped, build_mirror  # noqa: E402

# the edit's model -> its shipped manifest entry and the engine the answer names
EDITORS = {
    "instructpix2pix": ("sdxl-instructpix2pix-768", "diffusers-sdxl-instructpix2pix"),
    "flux2-klein": ("flux2-klein-4b", "diffusers-flux2-klein"),
}


def _client(store: ModelStore) -> TestClient:
    app = create_api()
    app.state.backend = in_process_backend(store)
    app.state.settings = Settings()
    return TestClient(app, raise_server_exceptions=False)


@pytest.fixture(scope="module")
def client(builtin_store, tmp_path_factory) -> TestClient:
    mirror = tmp_path_factory.mktemp("mirror")
    build_mirror(mirror)
    root = tmp_path_factory.mktemp("stores") / "editors"
    root.mkdir()
    for child in builtin_store.iterdir():
        (root / child.name).symlink_to(child)
    store = ModelStore(str(root), load_manifest(as_shipped(mirror, REPO_ROOT / "configs" / "models.yaml")))
    entries = [entry for entry, _ in EDITORS.values()]
    assert [outcome.error for outcome in pull(store, entries, mirror=str(mirror))] == [None] * len(entries)
    return _client(store)


@pytest.fixture(scope="module")
def portrait_png(astronaut_rgb) -> bytes:
    return encode_image(np.ascontiguousarray(astronaut_rgb[:300, 80:380]), "png")


@pytest.fixture(params=list(EDITORS))
def editor(request) -> str:
    return request.param


def edit(client: TestClient, photo: bytes, model: str, **fields):
    data = {"model": model, "prompt": "make it a red portrait", "steps": "2", "return": "json", **fields}
    return client.post("/v1/edit", files={"image": ("me.png", photo, "image/png")}, data=data)


def test_the_answer_names_the_editor_and_keeps_the_photos_size(client, portrait_png, editor):
    entry, engine = EDITORS[editor]
    answer = edit(client, portrait_png, editor, identity_keep="1")
    assert answer.status_code == 200, answer.text
    meta = answer.json()["meta"]
    assert engine in meta["engine"].split("+")
    assert entry in {weights["name"] for weights in meta["weights"]}
    assert (meta["width"], meta["height"]) == (300, 300)
    assert meta["report"]["edit"]["model"] == entry
    assert "compliance" in meta["timings_ms"]  # a neural editor redraws the photo: the gate saw it first


def test_random_weights_move_the_face_and_the_judge_refuses_without_identity_keep(client, portrait_png, editor):
    answer = edit(client, portrait_png, editor, identity_keep="0", min_identity="0.7")
    assert answer.status_code == 422 and answer.json()["error"]["code"] == "identity_changed", answer.text


def test_identity_keep_brings_the_persons_face_back(client, portrait_png, editor):
    answer = edit(client, portrait_png, editor, identity_keep="1", min_identity="0.7")
    assert answer.status_code == 200, answer.text
    assert answer.json()["meta"]["identity"]["same_person"] is True


def test_chinese_words_without_a_language_model_are_a_422_asking_for_english(client, portrait_png, editor):
    answer = edit(client, portrait_png, editor, prompt="把背景换成海边")
    assert answer.status_code == 422 and "English" in answer.json()["error"]["message"], answer.text


def test_without_the_weights_the_answer_names_the_pull_command(builtin_store, portrait_png, editor):
    store = ModelStore(str(builtin_store), load_manifest(REPO_ROOT / "configs" / "models.yaml"))
    answer = edit(_client(store), portrait_png, editor)
    entry, _ = EDITORS[editor]
    assert answer.status_code == 503 and f"portrait models pull {entry}" in answer.json()["error"]["message"]


def test_each_editor_weighs_its_steps_at_its_size():
    context = job_context(Settings())
    planned = {
        model: render_work(EditParams(model=model, prompt="make it a red portrait", steps=4), context)
        for model in EDITORS
    }
    assert planned == {"instructpix2pix": pytest.approx(4 * 0.768**2), "flux2-klein": pytest.approx(4 * 1.024**2)}
