"""Generated clothes (tier 1, ``attire_engine=generative``): the drawn template redrawn by the Renderer inside the
clothes' region only — the face and hair are the photo's own pixels, bit for bit — and the job that runs it on tiny
random SDXL parts (tests/unit/render/tiny_sdxl.py): the engine named, the face where it was, the clothes changed;
without the generative weights a 503 naming them, never the template in their place."""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image

from deployments.common.image import encode_image
from deployments.common.weights import ModelStore, load_manifest
from deployments.faces.analyze import FaceAnalysisPredictor
from deployments.idphoto.params import parse_params
from deployments.idphoto.pipeline import matte_u8, prepare_subject
from deployments.idphoto.redraw import paste_redraw, plan_redraw
from serve_app.local_backend import in_process_backend
from serve_app.routes import create_api
from serve_app.settings import Settings
from tests.conftest import REPO_ROOT

GENERATIVE = {"spec": "cn-1inch", "attire": "suit-tie", "attire_engine": "generative", "return": "json"}


@pytest.fixture(scope="module")
def subject(astronaut_rgb, mediapipe_dir, matter):
    """The astronaut prepared for framing in the suit and tie (tier 0), as the job prepares it."""
    faces = FaceAnalysisPredictor(mediapipe_dir).analyze(astronaut_rgb)
    params = parse_params({"spec": "cn-1inch", "attire": "suit-tie"}, None)
    return prepare_subject(astronaut_rgb, faces, matter.segment(astronaut_rgb, "modnet"), params)


@pytest.fixture(scope="module")
def plan(subject):
    height, width = subject.rgb.shape[:2]
    alpha = matte_u8(subject.low, (width, height), subject.rgb)
    return plan_redraw(subject.rgb, alpha, subject.attire.fits, subject.attire.parse, "a navy suit", 128)


def test_the_region_is_the_clothes_widened_and_never_a_face_or_hair_pixel(subject, plan):
    region = plan.region > 0
    parse = subject.attire.parse
    assert not (region & (parse.face_skin | parse.hair)).any()
    cover = subject.attire.fits[0].cover > 0
    assert region.sum() > 0.9 * (cover & ~parse.face_skin & ~parse.hair).sum()
    assert plan.mask.shape == (plan.canvas.height, plan.canvas.width) and plan.mask.max() == 255
    assert max(plan.canvas.width, plan.canvas.height) in range(120, 137) and plan.canvas.width % 8 == 0


def test_what_comes_back_lands_in_the_region_only(subject, plan):
    noise = np.random.default_rng(1).integers(0, 256, (plan.canvas.height, plan.canvas.width, 3), dtype=np.uint8)
    eye_px = subject.attire.fits[0].placement.eye_distance_px
    redrawn = paste_redraw(subject.rgb, noise, plan, eye_px)
    outside = plan.region == 0
    np.testing.assert_array_equal(redrawn[outside], subject.rgb[outside])
    inside = plan.region > 0
    assert np.abs(redrawn[inside].astype(int) - subject.rgb[inside].astype(int)).mean() > 30


def _post(client: TestClient, photo: bytes, **fields):
    return client.post("/v1/idphoto", files={"image": ("me.png", photo, "image/png")}, data=fields)


def _client(backend) -> TestClient:
    """The job routes over ``backend``; the synchronous rendering budget raised: the weighed size is the shipped
    manifest's 1024² (tests/unit/jobs_api/test_render_budget.py holds the budget), the tiny parts render 128²."""
    app = create_api()
    app.state.backend, app.state.settings = backend, Settings(sync_render_mp_steps=100)
    return TestClient(app, raise_server_exceptions=False)


def _photo(answer) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(answer.json()["image_b64"]))).convert("RGB"))


def test_the_job_redraws_the_clothes_and_delivers_the_persons_own_face(generative_backend, astronaut_rgb):
    client, photo = _client(generative_backend), encode_image(astronaut_rgb, "png")
    drawn = _post(client, photo, **{**GENERATIVE, "attire_engine": "template"})
    generated = _post(client, photo, **GENERATIVE)
    assert generated.status_code == 200, generated.text
    meta = generated.json()["meta"]
    assert {"diffusers-sdxl"} <= set(meta["engine"].split("+"))
    weights = {item["name"] for item in meta["weights"]}
    assert {"sdxl-base-1.0", "controlnet-openpose-sdxl", "controlnet-canny-sdxl"} <= weights
    assert meta["identity"]["same_person"]  # judged on the delivered 295x413 photo against the source
    template, redrawn = _photo(drawn), _photo(generated)
    height, width = redrawn.shape[:2]
    eyes = slice(int(0.3 * height), int(0.45 * height)), slice(int(0.3 * width), int(0.7 * width))
    np.testing.assert_array_equal(redrawn[eyes], template[eyes])  # the face: the same pixels in either tier
    shoulders = slice(int(0.9 * height), height), slice(0, width)
    assert np.abs(redrawn[shoulders].astype(int) - template[shoulders].astype(int)).mean() > 5


def test_without_the_generative_weights_the_answer_is_a_503_not_the_template(builtin_store, astronaut_rgb):
    store = ModelStore(str(builtin_store), load_manifest(REPO_ROOT / "configs" / "models.yaml"))
    answer = _post(_client(in_process_backend(store)), encode_image(astronaut_rgb, "png"), **GENERATIVE)
    assert answer.status_code == 503
    error = answer.json()["error"]
    assert error["code"] == "model_unavailable" and "portrait models pull" in error["message"]


def test_generated_clothes_go_with_an_attire(astronaut_rgb):
    with pytest.raises(Exception, match="attire_engine goes with an attire"):
        parse_params({"spec": "cn-1inch", "attire_engine": "generative"}, None)
