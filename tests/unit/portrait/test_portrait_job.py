"""The portrait job in-process on tiny random SDXL parts (tests/unit/render/tiny_sdxl.py) pulled from a folder mirror
under the shipped manifest's names, beside the shipped built-ins (the compliance gate, the face analyzer, MODNet, the
identity judge): ``POST /v1/portrait`` answers a portrait of the asked size naming every model it ran, the person's
own face where ``keep_face`` puts it, and the identity judge refuses what random weights draw without it."""

from __future__ import annotations

import asyncio
import base64
import io
import json

import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image

pytest.importorskip("diffusers")

from deployments.common.image import encode_image  # noqa: E402
from deployments.common.weights import ModelStore, load_manifest  # noqa: E402
from deployments.faces.types import ANALYZE_FACES  # noqa: E402
from deployments.portrait.conditions import face_core, fit_canvas  # noqa: E402
from deployments.portrait.styles import default_styles  # noqa: E402
from serve_app.local_backend import in_process_backend  # noqa: E402
from serve_app.routes import create_api  # noqa: E402
from serve_app.settings import Settings  # noqa: E402
from tests.conftest import REPO_ROOT  # noqa: E402

SIZE = 256  # the smallest render the job takes; the tiny parts draw it in well under a second a step
FAST = {"width": SIZE, "height": SIZE, "steps": 2}
PORTRAIT_MODELS = {"sdxl-base-1.0", "controlnet-openpose-sdxl", "controlnet-canny-sdxl", "ip-adapter-plus-face-sdxl"}


@pytest.fixture(scope="module")
def backend(generative_backend):
    return generative_backend


def _client(backend) -> TestClient:
    app = create_api()
    app.state.backend = backend
    app.state.settings = Settings()
    return TestClient(app, raise_server_exceptions=False)


@pytest.fixture(scope="module")
def client(backend) -> TestClient:
    return _client(backend)


@pytest.fixture(scope="module")
def selfie(astronaut_rgb) -> np.ndarray:
    return np.ascontiguousarray(astronaut_rgb[:320, 60:380])


def portrait(client: TestClient, photo: np.ndarray, **options):
    fields = {"return": "json", **FAST, **options}
    return client.post(
        "/v1/portrait", files={"image": ("me.png", encode_image(photo, "png"), "image/png")}, data=fields
    )


def image_of(answer) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(answer.json()["image_b64"]))).convert("RGB"))


def test_a_portrait_is_the_asked_size_and_names_the_renderer_and_every_model_it_ran(client, selfie):
    answer = portrait(client, selfie, style="business", seed=11)
    assert answer.status_code == 200, answer.text
    meta = answer.json()["meta"]
    assert "diffusers-sdxl" in meta["engine"].split("+")
    weights = {item["name"] for item in meta["weights"]}
    assert PORTRAIT_MODELS <= weights and "modnet" in weights
    assert image_of(answer).shape == (SIZE, SIZE, 3)
    report = meta["report"]["portrait"]
    assert report["style"] == "business" and report["seed"] == 11 and meta["params"]["seed"] == 11
    assert report["controlnets"] == {"controlnet-openpose-sdxl": 0.7, "controlnet-canny-sdxl": 0.35}
    assert report["prompt"].startswith(default_styles()["business"].prompt)
    assert report["compliance"] in {"rules", "llm"}


def test_the_same_seed_draws_the_same_portrait(client, selfie):
    first, again = (portrait(client, selfie, seed=5) for _ in range(2))
    np.testing.assert_array_equal(image_of(first), image_of(again))


def test_keep_face_puts_the_persons_own_face_where_the_pose_holds_it(client, backend, selfie):
    answer = portrait(client, selfie, seed=3)
    assert answer.status_code == 200, answer.text
    result = image_of(answer).astype(int)
    (face, *_) = sorted(
        asyncio.run(backend.call(ANALYZE_FACES, selfie)), key=lambda f: -(f.box[2] - f.box[0]) * (f.box[3] - f.box[1])
    )
    canvas = fit_canvas((selfie.shape[1], selfie.shape[0]), face, (SIZE, SIZE))
    core = face_core(canvas, face)
    placed = canvas.place(selfie).astype(int)
    assert core.sum() > 400
    assert np.abs(result - placed)[core].mean() < 6  # the photo's face (warped twice: to the crop and back)
    assert np.abs(result - placed)[~core].mean() > 20  # elsewhere what the random renderer drew
    identity = answer.json()["meta"]["identity"]
    assert identity["same_person"] is True


def test_without_keep_face_random_weights_draw_somebody_else_and_the_judge_refuses(client, selfie):
    answer = portrait(client, selfie, keep_face="false", seed=0, count=2)
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == "identity_changed"
    assert [c["seed"] for c in error["details"]["candidates"]] == [0, 1, 2, 3]  # two rounds of two
    assert all(not c["same_person"] for c in error["details"]["candidates"])


def test_without_the_generative_weights_the_answer_names_the_pull_command(builtin_store, selfie):
    store = ModelStore(str(builtin_store), load_manifest(REPO_ROOT / "configs" / "models.yaml"))
    answer = portrait(_client(in_process_backend(store)), selfie)
    assert answer.status_code == 503
    error = answer.json()["error"]
    assert error["code"] == "model_unavailable" and "portrait models pull" in error["message"]


def test_the_style_comes_from_the_prompts_words_and_chinese_is_left_out_without_a_language_model(client, selfie):
    answer = portrait(client, selfie, prompt="汉服写真, 温柔", seed=1)
    assert answer.status_code == 200, answer.text
    report = answer.json()["meta"]["report"]["portrait"]
    assert report["style"] == "hanfu" and report["chosen_by"] == "prompt"
    assert report["prompt"] == default_styles()["hanfu"].prompt and "left out" in report["prompt_note"]


@pytest.mark.parametrize(
    ("options", "code"),
    [
        ({"style": "nope"}, "invalid_parameter"),
        ({"width": 1536, "height": 1536, "hires": "true"}, "invalid_parameter"),  # over the output cap
        ({"count": 5}, "invalid_parameter"),
        ({"prompt": "make her look like a white woman"}, "instruction_refused"),
    ],
)
def test_what_the_job_refuses_before_any_work(client, selfie, options, code):
    answer = portrait(client, selfie, **options)
    assert answer.status_code == 422 and answer.json()["error"]["code"] == code, answer.text


def test_the_styles_are_listed_with_their_names_in_both_languages(client):
    styles = client.get("/v1/portrait/styles").json()["styles"]
    assert [style["name"] for style in styles] == list(default_styles())
    assert all(style["title"]["zh"] and style["title"]["en"] for style in styles)
    assert json.dumps(styles, ensure_ascii=False).count("商务") >= 1


def test_the_hires_fix_answers_one_and_a_half_times_the_render(client, selfie):
    answer = portrait(client, selfie, hires="true", seed=2)
    assert answer.status_code == 200, answer.text
    assert image_of(answer).shape == (SIZE * 3 // 2, SIZE * 3 // 2, 3)
    report = answer.json()["meta"]["report"]["portrait"]
    assert report["hires"] is True and {"hires_load", "hires_render"} <= set(report["render_ms"])


def test_a_portrait_job_reports_the_steps_of_every_render_it_planned(backend, selfie):
    from serve_app.jobs import parse_job_params, run_job
    from serve_app.jobs.context import job_context
    from serve_app.jobs.progress import reporting_to

    heard: list[tuple[float, dict[str, int]]] = []
    context = job_context(Settings())
    params = parse_job_params("portrait", {**FAST, "steps": 3, "count": 2, "hires": "true", "seed": 1}, context)

    async def run() -> None:
        with reporting_to(lambda fraction, detail: heard.append((fraction, detail))):
            await run_job(backend, "portrait", encode_image(selfie, "png"), params, context)

    asyncio.run(run())
    # two candidates of 3 steps and their Hires. fix redraws (3 steps × 0.4 strength: 1 each), planned up front
    assert {detail["steps"] for _, detail in heard} == {8}
    assert [detail["steps_done"] for _, detail in heard] == sorted(detail["steps_done"] for _, detail in heard)
    assert heard[-1] == (1.0, {"steps_done": 8, "steps": 8})
