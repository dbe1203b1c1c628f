"""The edit job in-process (the FastAPI app over the local backend; no Ray): ``POST /v1/edit`` names its engine,
each look keeps the astronaut the same person by the identity judge (and the evaluation faces, where ../shared is),
``scope=face`` leaves the rest of the restored photo bit for bit, the policy refuses at the route, and
``GET /v1/edit/looks`` lists the looks."""

from __future__ import annotations

import asyncio
import io

import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image

from deployments.common.image import encode_image
from deployments.common.weights import ModelStore, load_manifest
from deployments.edit.looks import default_looks
from deployments.edit.mask import face_mask
from deployments.faces.types import ANALYZE_FACES
from deployments.restore.pipeline import select_faces
from serve_app.backend import Backend
from serve_app.jobs import job_context, parse_job_params, run_job
from serve_app.jobs.context import Timings
from serve_app.jobs.edit import RESTORE_DEFAULTS
from serve_app.jobs.restore import default_restore_model, restore_faces
from serve_app.local_backend import in_process_backend
from serve_app.routes import create_api
from serve_app.settings import Settings
from tests.conftest import REPO_ROOT


@pytest.fixture(scope="module")
def backend(builtin_store) -> Backend:
    return in_process_backend(ModelStore(str(builtin_store), load_manifest(REPO_ROOT / "configs" / "models.yaml")))


@pytest.fixture(scope="module")
def client(backend) -> TestClient:
    app = create_api()
    app.state.backend = backend
    app.state.settings = Settings()
    return TestClient(app, raise_server_exceptions=False)


@pytest.fixture(scope="module")
def portrait_png(astronaut_rgb) -> bytes:
    return encode_image(np.ascontiguousarray(astronaut_rgb[:300, 80:380]), "png")


def rgb_of(body: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(body)).convert("RGB"))


def edit(backend: Backend, photo: bytes, **options):
    context = job_context(Settings())
    params = parse_job_params("edit", {"return": "json", **options}, context)
    return asyncio.run(run_job(backend, "edit", photo, params, context))


def test_post_v1_edit_names_the_look_engine(client, portrait_png):
    answer = client.post(
        "/v1/edit", files={"image": ("p.png", portrait_png)}, data={"look": "hk80s", "restore": "false"}
    )
    assert answer.status_code == 200, answer.text
    assert answer.headers["X-Portrait-Engine"] == "look" and answer.headers["X-Portrait-Weights"] == "none"
    assert answer.headers["content-type"] == "image/png"
    assert "same_person" in answer.headers["X-Portrait-Identity"]


def test_the_prompt_picks_the_look_and_json_says_so(client, portrait_png):
    answer = client.post(
        "/v1/edit", files={"image": ("p.png", portrait_png)}, data={"prompt": "80年代港风胶片质感", "return": "json"}
    )
    assert answer.status_code == 200, answer.text
    meta = answer.json()["meta"]
    assert meta["params"]["look"] == "hk80s" and meta["report"]["edit"]["chosen_by"] == "prompt"
    assert "look" in meta["engine"].split("+")  # with the restorer that ran before it


def test_a_prompt_naming_no_look_is_a_422_naming_the_looks(client, portrait_png):
    answer = client.post("/v1/edit", files={"image": ("p.png", portrait_png)}, data={"prompt": "make it nice"})
    assert answer.status_code == 422
    assert all(name in answer.json()["error"]["message"] for name in default_looks())


def test_the_policy_refuses_at_the_route(client, portrait_png):
    answer = client.post("/v1/edit", files={"image": ("p.png", portrait_png)}, data={"prompt": "把他变成白人"})
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error["code"] == "instruction_refused" and error["details"]["reason_zh"]


def test_get_v1_edit_looks_lists_every_look_with_its_titles(client):
    looks = client.get("/v1/edit/looks").json()["looks"]
    assert [look["name"] for look in looks] == list(default_looks())
    assert looks[0]["title"] == {"zh": "80年代港风胶片", "en": "80s Hong Kong film"}


@pytest.mark.parametrize("name", list(default_looks()))
def test_each_look_keeps_the_astronaut_the_same_person(backend, portrait_png, name):
    result = edit(backend, portrait_png, look=name)
    identity = result.meta.identity
    assert identity["same_person"] and identity["judge"] == "dlib", identity
    assert result.meta.faces == 1


def test_scope_face_leaves_the_rest_of_the_restored_photo_bit_for_bit(backend, portrait_png):
    rgb = rgb_of(portrait_png)
    faces = select_faces(asyncio.run(backend.call(ANALYZE_FACES, rgb)), rgb.shape[1], rgb.shape[0], RESTORE_DEFAULTS)

    async def restored() -> np.ndarray:
        model = await default_restore_model(backend)
        return (await restore_faces(backend, rgb, faces, RESTORE_DEFAULTS, model, False, Timings())).rgb

    base = asyncio.run(restored())
    result = edit(backend, portrait_png, look="faded", scope="face", format="png")
    out = rgb_of(result.body)
    mask = face_mask(rgb.shape[:2], faces)
    assert (mask == 0).mean() > 0.5
    assert np.array_equal(out[mask == 0], base[mask == 0])
    assert not np.array_equal(out[mask == 1], base[mask == 1])
    kept = rgb_of(edit(backend, portrait_png, look="faded", identity_keep=1, format="png").body)
    assert np.array_equal(kept[mask == 1], base[mask == 1])


def test_scope_face_without_a_face_is_a_422(backend):
    ramp = np.dstack([np.tile(np.linspace(0, 255, 128, dtype=np.uint8), (128, 1))] * 3)
    with pytest.raises(Exception, match="needs a face"):
        edit(backend, encode_image(ramp, "png"), look="bw", scope="face")


def test_each_look_keeps_the_evaluation_faces_the_same_people(backend, shared_dir):
    photos = sorted(
        p for p in (shared_dir / "eval" / "faces").glob("*") if p.suffix.lower() in (".jpg", ".jpeg", ".png")
    )
    if not photos:
        pytest.skip("no evaluation faces under ../shared/eval/faces")
    for path in photos[:4]:
        for name in ("hk80s", "portra", "fuji", "teal-orange", "texture"):  # bw, faded, grain: docs/BENCHMARKS.md
            identity = edit(backend, path.read_bytes(), look=name, restore="false").meta.identity
            if identity and "similarity" in identity:
                assert identity["same_person"], (path.name, name, identity)
