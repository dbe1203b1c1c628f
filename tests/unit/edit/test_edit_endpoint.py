"""The edit job's external editor against a fake OpenAI-compatible images server on 127.0.0.1 (listed in
``PORTRAIT_EDIT_ENDPOINT_HOSTS``, as a GPU box on a private network would be): ``model=external`` answers with the
endpoint's tinted photo at the photo's size, names the engine, model and host (never the key) and reports identity;
a slow endpoint is a 504 and a broken one a 502, each with the request id; a refused prompt is a 422; an unconfigured
or unlisted endpoint is refused before anything is sent; an asynchronous job whose endpoint fails ends ``failed``
with the error recorded."""

from __future__ import annotations

import asyncio
import base64
import io
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from fastapi.testclient import TestClient
from PIL import Image

from deployments.common.image import encode_image
from deployments.common.weights import ModelStore, load_manifest
from serve_app.backend import Backend
from serve_app.jobs import JOBS, job_context
from serve_app.local_backend import in_process_backend
from serve_app.routes import create_api
from serve_app.runner.jobs_runner import job_routes
from serve_app.runner.routing import build_routing_table
from serve_app.runner.worker import BucketWorker, job_executor
from serve_app.settings import Settings
from tests.conftest import REPO_ROOT
from tests.served import served
from tests.unit.jobs_api.conftest import make_jobs_app
from tests.unit.runner.bucket_fixtures import FAST_RETRY, local_backend, photo_jpeg  # noqa: F401

PROMPT = "80年代港风胶片质感"
API_KEY = "sk-test-never-shown"


def _png_b64(rgb: np.ndarray) -> str:
    return base64.b64encode(encode_image(rgb, "png")).decode("ascii")


def _rgb(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def _tinted(photo: np.ndarray) -> np.ndarray:
    """Warmer, at half the size: what an editor that works at its own resolution gives back."""
    warm = np.clip(photo.astype(np.int16) + np.array([24, 6, -18]), 0, 255).astype(np.uint8)
    return np.asarray(Image.fromarray(warm).resize((photo.shape[1] // 2, photo.shape[0] // 2)))


def _images_answer(rgb: np.ndarray) -> JSONResponse:
    return JSONResponse({"created": 0, "data": [{"b64_json": _png_b64(rgb), "revised_prompt": None}]})


async def _slowly(photo: np.ndarray) -> Response:
    await asyncio.sleep(2.0)
    return _images_answer(_tinted(photo))


# What the fake server answers, by the model name it is sent (each test configures the model it needs).
ANSWERS: dict[str, Callable[[np.ndarray], Any]] = {
    "tint": lambda photo: _images_answer(_tinted(photo)),
    "slow": _slowly,
    "not-json": lambda photo: PlainTextResponse("<html>upstream busy</html>"),
    "no-data": lambda photo: JSONResponse({"created": 0, "data": []}),
    "no-b64": lambda photo: JSONResponse({"data": [{"url": "https://images.example/1.png"}]}),
    "bad-base64": lambda photo: JSONResponse({"data": [{"b64_json": "%%% not base64 %%%"}]}),
    "not-an-image": lambda photo: JSONResponse({"data": [{"b64_json": base64.b64encode(b"GIF89a...").decode()}]}),
    "square": lambda photo: _images_answer(np.zeros((256, 256, 3), np.uint8)),
    "huge": lambda photo: JSONResponse({"data": [{"b64_json": "A" * 200_000}]}),
    "broken": lambda photo: JSONResponse({"error": {"message": "CUDA out of memory"}}, status_code=500),
    "redirect": lambda photo: RedirectResponse("http://169.254.169.254/latest", status_code=307),
    "refuse": lambda photo: JSONResponse(
        {"error": {"code": "content_policy_violation", "message": "rejected by the safety system"}}, status_code=400
    ),
}


@dataclass
class Sent:
    fields: dict[str, str]
    image: bytes
    authorization: str | None


@dataclass
class FakeImages:
    url: str
    sent: list[Sent] = field(default_factory=list)


def fake_images_app(sent: list[Sent]) -> FastAPI:
    app = FastAPI()

    @app.post("/v1/images/edits")
    async def edits(request: Request) -> Response:
        form = await request.form()
        image = await form["image"].read()
        fields = {name: str(value) for name, value in form.items() if name != "image"}
        sent.append(Sent(fields, image, request.headers.get("authorization")))
        answer = ANSWERS[fields["model"]](_rgb(image))
        return await answer if asyncio.iscoroutine(answer) else answer

    return app


@pytest.fixture(scope="module")
def images_server() -> Iterator[FakeImages]:
    sent: list[Sent] = []
    with served(fake_images_app(sent)) as url:
        yield FakeImages(f"{url}/v1", sent)


@pytest.fixture
def fake(images_server) -> FakeImages:
    images_server.sent.clear()
    return images_server


def endpoint_settings(fake: FakeImages, model: str, **overrides: Any) -> Settings:
    options = {"edit_endpoint_timeout_s": 10.0, "edit_endpoint_hosts": ("127.0.0.1",), **overrides}
    return Settings(edit_endpoint_url=fake.url, edit_endpoint_model=model, **options)


@pytest.fixture(scope="module")
def backend(builtin_store) -> Backend:
    return in_process_backend(ModelStore(str(builtin_store), load_manifest(REPO_ROOT / "configs" / "models.yaml")))


@pytest.fixture
def client(backend) -> TestClient:
    app = create_api()
    app.state.backend = backend
    app.state.settings = Settings()
    return TestClient(app, raise_server_exceptions=False)


@pytest.fixture(scope="module")
def portrait_png(astronaut_rgb) -> bytes:
    """240x300: not square, so a shape the endpoint changes shows."""
    return encode_image(np.ascontiguousarray(astronaut_rgb[:300, 100:340]), "png")


def edit_with(client: TestClient, settings: Settings, photo: bytes, **form: str):
    client.app.state.settings = settings
    data = {"model": "external", "prompt": PROMPT, "restore": "false", **form}
    return client.post("/v1/edit", files={"image": ("p.png", photo)}, data=data)


def server_error(answer) -> dict:
    """A 5xx answer's error, checked to carry the request id (the header's, made at the edge)."""
    error = answer.json()["error"]
    assert error["request_id"] == answer.headers["X-Request-Id"]
    return error


def test_model_external_answers_with_the_endpoints_edit_at_the_photos_size(client, fake, portrait_png, monkeypatch):
    monkeypatch.setenv("PORTRAIT_EDIT_ENDPOINT_API_KEY", API_KEY)
    answer = edit_with(client, endpoint_settings(fake, "tint"), portrait_png, **{"return": "json"})
    assert answer.status_code == 200, answer.text
    meta, host = answer.json()["meta"], fake.url.split("/")[2]
    assert meta["engine"] == "external"
    assert meta["weights"] == [
        {"name": "tint", "sha256": None, "state": None, "label": f"OpenAI-compatible images endpoint at {host}"}
    ]
    edit = meta["report"]["edit"]
    assert (edit["endpoint"], edit["model"], edit["scope"]) == (host, "tint", "whole") and "look" not in edit
    assert meta["identity"]["same_person"], meta["identity"]
    assert (meta["width"], meta["height"]) == (240, 300)  # the half-size answer scaled back
    result = _rgb(base64.b64decode(answer.json()["image_b64"]))
    before = _rgb(portrait_png)
    assert result.shape == before.shape
    assert result[..., 0].mean() > before[..., 0].mean() + 10  # the endpoint's warm tint, composed at strength 1
    (sent,) = fake.sent
    assert sent.fields == {"model": "tint", "prompt": PROMPT, "n": "1", "response_format": "b64_json"}
    assert sent.image.startswith(b"\x89PNG") and _rgb(sent.image).shape == (300, 240, 3)
    assert sent.authorization == f"Bearer {API_KEY}"
    assert API_KEY not in answer.text


def test_a_plain_image_answer_names_the_engine_and_the_model_in_its_headers(client, fake, portrait_png):
    answer = edit_with(client, endpoint_settings(fake, "tint"), portrait_png, scope="face", identity_keep="0.5")
    assert answer.status_code == 200, answer.text
    assert answer.headers["X-Portrait-Engine"] == "external"
    assert answer.headers["X-Portrait-Weights"].startswith("tint@unpinned;label=")
    assert "same_person" in answer.headers["X-Portrait-Identity"]


def test_a_large_photo_is_sent_at_max_side_px_with_its_size_when_asked(client, fake, portrait_png):
    settings = endpoint_settings(fake, "tint", edit_endpoint_max_side_px=120, edit_endpoint_size="photo")
    assert edit_with(client, settings, portrait_png).status_code == 200
    (sent,) = fake.sent
    assert _rgb(sent.image).shape == (120, 96, 3) and sent.fields["size"] == "96x120"


def test_an_endpoint_slower_than_its_timeout_is_a_504_with_the_request_id(client, fake, portrait_png):
    answer = edit_with(client, endpoint_settings(fake, "slow", edit_endpoint_timeout_s=0.3), portrait_png)
    assert answer.status_code == 504
    error = server_error(answer)
    assert error["code"] == "editor_timeout" and "0.3 s" in error["message"]


@pytest.mark.parametrize(
    ("model", "overrides", "says"),
    [
        ("not-json", {}, "images JSON"),
        ("no-data", {}, "images JSON"),
        ("no-b64", {}, "images JSON"),
        ("bad-base64", {}, "not base64"),
        ("not-an-image", {}, "cannot be read"),
        ("square", {}, "256x256 image for a 240x300 photo"),
        ("huge", {"edit_endpoint_max_response_bytes": 100_000}, "more than 100000 bytes"),
        ("broken", {}, "HTTP 500"),
        ("redirect", {}, "HTTP 307"),
    ],
)
def test_a_broken_answer_is_a_502_with_the_request_id(client, fake, portrait_png, model, overrides, says):
    answer = edit_with(client, endpoint_settings(fake, model, **overrides), portrait_png)
    assert answer.status_code == 502, answer.text
    error = server_error(answer)
    assert error["code"] == "editor_failed" and says in error["message"], error["message"]


def test_an_unreachable_endpoint_is_a_502(client, fake, portrait_png):
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{closed.getsockname()[1]}/v1"  # bound, never listening: the connection is refused
    settings = Settings(edit_endpoint_url=url, edit_endpoint_model="tint", edit_endpoint_hosts=("127.0.0.1",))
    answer = edit_with(client, settings, portrait_png)
    closed.close()
    assert answer.status_code == 502 and server_error(answer)["message"].endswith("cannot be reached (ConnectError)")


def test_a_prompt_the_endpoint_refuses_is_a_422(client, fake, portrait_png):
    answer = edit_with(client, endpoint_settings(fake, "refuse"), portrait_png)
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error["code"] == "editor_refused" and "rejected by the safety system" in error["message"]


def test_an_endpoint_on_loopback_not_listed_is_refused_before_anything_is_sent(client, fake, portrait_png):
    answer = edit_with(client, endpoint_settings(fake, "tint", edit_endpoint_hosts=()), portrait_png)
    assert answer.status_code == 502
    assert "PORTRAIT_EDIT_ENDPOINT_HOSTS does not list it" in server_error(answer)["message"]
    assert fake.sent == []


def test_without_an_endpoint_model_external_is_a_503_naming_the_settings(client, portrait_png):
    answer = edit_with(client, Settings(), portrait_png)
    assert answer.status_code == 503
    error = server_error(answer)
    assert error["code"] == "model_unavailable" and "PORTRAIT_EDIT_ENDPOINT_URL" in error["message"]


@pytest.mark.parametrize(
    ("form", "says"),
    [({"prompt": ""}, "give one"), ({"look": "bw"}, "reads only `prompt`")],
)
def test_model_external_takes_a_prompt_and_no_look(client, fake, portrait_png, form, says):
    answer = edit_with(client, endpoint_settings(fake, "tint"), portrait_png, **form)
    assert answer.status_code == 422 and says in answer.json()["error"]["message"]


def test_the_refusal_policy_holds_before_the_endpoint_is_called(client, fake, portrait_png):
    answer = edit_with(client, endpoint_settings(fake, "tint"), portrait_png, prompt="把他变成白人")
    assert answer.json()["error"]["code"] == "instruction_refused" and fake.sent == []


def test_an_async_job_whose_endpoint_fails_ends_failed_with_the_error_recorded(
    tmp_path,
    fake,
    local_backend,  # noqa: F811
    photo_jpeg,  # noqa: F811
):
    settings = endpoint_settings(fake, "broken")
    context = job_context(settings)
    app = make_jobs_app(tmp_path, local_backend, context)
    table = build_routing_table(job_routes(app.runner.config, app.store, JOBS), context)
    app.runner.attach(
        BucketWorker(
            table, job_executor(local_backend, context), context, on_outcome=app.runner.observe, retry=FAST_RETRY
        )
    )
    app.client.app.state.settings = settings
    with app.client:
        form = {"task": "edit", "model": "external", "prompt": PROMPT, "restore": "false"}
        accepted = app.client.post("/v1/jobs", files={"image": ("me.jpg", photo_jpeg, "image/jpeg")}, data=form)
        assert accepted.status_code == 202, accepted.text
        done = app.wait(accepted.json()["id"])
    assert done["status"] == "failed" and "result" not in done
    assert done["error"]["code"] == "editor_failed" and "HTTP 500" in done["error"]["message"]
    assert len(fake.sent) == FAST_RETRY.max_attempts  # retried, then recorded: not left waiting for the endpoint
