"""The plain-language routes in-process (TestClient over the real engines): ``/v1/instructions`` and the bad inputs of
the OpenAI-compatible routes, each a clear 4xx in the shape its route promises."""

from __future__ import annotations

import base64
import io
import re

import pytest
from fastapi.testclient import TestClient
from PIL import Image

from serve_app.instructions import InstructionsConfig


@pytest.fixture
def client(api):
    with TestClient(api) as client:
        yield client


def _data_url(photo: bytes) -> str:
    return "data:image/jpeg;base64," + base64.b64encode(photo).decode("ascii")


def _chat(text: str | None, image_url: str | None, model: str = "portrait") -> dict:
    content: list[dict] = [{"type": "text", "text": text}] if text is not None else []
    if image_url is not None:
        content.append({"type": "image_url", "image_url": {"url": image_url}})
    return {"model": model, "messages": [{"role": "user", "content": content}]}


# --- POST /v1/instructions -------------------------------------------------------------------------------------------


def test_instructions_answer_the_job_and_params_the_job_route_accepts(client, photo_jpeg):
    answer = client.post("/v1/instructions", json={"prompt": "蓝底一寸证件照"})
    assert answer.status_code == 200
    assert answer.json() == {
        "task": "idphoto",
        "params": {"spec": "cn-1inch", "background": "#628bce"},
        "engine": "rules",
        "notes": ['job idphoto: named by "证件照"', 'background = blue from "蓝底"', 'spec = cn-1inch from "一寸"'],
    }
    fields = {key: str(value) for key, value in answer.json()["params"].items()}
    made = client.post("/v1/idphoto", files={"image": ("me.jpg", photo_jpeg, "image/jpeg")}, data=fields)
    assert made.status_code == 200 and made.headers["content-type"] == "image/jpeg"


def test_instructions_take_a_chosen_job(client):
    answer = client.post("/v1/instructions", json={"prompt": "sketch", "task": "cartoon"})
    assert (answer.status_code, answer.json()["params"]) == (200, {"style": "sketch"})
    unknown = client.post("/v1/instructions", json={"prompt": "sketch", "task": "teleport"})
    assert (unknown.status_code, unknown.json()["error"]["code"]) == (422, "invalid_parameter")


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"prompt": "hello there"}, 422, "instruction_unclear"),
        ({"prompt": "修复这张照片再做成证件照"}, 422, "instruction_unclear"),
        ({"prompt": ""}, 422, "invalid_parameter"),
        ({"prompt": "修复" * 5000}, 413, "prompt_too_long"),
        ({}, 422, "invalid_parameter"),
        ({"prompt": "修复", "colour": "red"}, 422, "invalid_parameter"),
    ],
    ids=["no job", "two jobs", "empty", "10 kB", "no prompt", "unknown field"],
)
def test_instructions_refusals_are_clear(client, body, status, code):
    answer = client.post("/v1/instructions", json=body)
    assert (answer.status_code, answer.json()["error"]["code"]) == (status, code)
    assert answer.json()["error"]["message"]


# --- OpenAI-compatible bad inputs ------------------------------------------------------------------------------------


def _openai_error(answer) -> dict:
    error = answer.json()["error"]
    assert set(error) >= {"message", "type", "param", "code"}
    return error


def test_a_chat_prompt_without_an_image_is_a_400(client):
    answer = client.post(
        "/v1/chat/completions", json={"model": "portrait", "messages": [{"role": "user", "content": "修复"}]}
    )
    error = _openai_error(answer)
    assert (answer.status_code, error["code"], error["param"], error["type"]) == (
        400,
        "image_required",
        "messages",
        "invalid_request_error",
    )


def test_a_remote_image_url_is_refused_unless_its_host_is_allowed(client, api):
    answer = client.post("/v1/chat/completions", json=_chat("修复", "https://example.com/me.jpg"))
    assert (answer.status_code, _openai_error(answer)["code"]) == (400, "remote_image_refused")
    assert "data URL" in _openai_error(answer)["message"]
    api.state.instructions = InstructionsConfig(image_url_hosts=("127.0.0.1",))
    still = client.post("/v1/chat/completions", json=_chat("修复", "https://example.com/me.jpg"))
    assert _openai_error(still)["code"] == "remote_image_refused"
    ftp = client.post("/v1/chat/completions", json=_chat("修复", "ftp://127.0.0.1/me.jpg"))
    assert (ftp.status_code, _openai_error(ftp)["code"]) == (422, "invalid_parameter")


def test_an_allowed_host_is_fetched_without_following_redirects(client, api, photo_server):
    port = photo_server.server_address[1]
    photo_host = f"http://127.0.0.1:{port}"
    api.state.instructions = InstructionsConfig(
        image_url_hosts=("127.0.0.1",), image_url_ports=(port,), image_url_networks=("127.0.0.0/8",)
    )
    answer = client.post("/v1/chat/completions", json=_chat("素描", f"{photo_host}/me.jpg"))
    assert (answer.status_code, answer.json()["portrait"]["params"]) == (200, {"style": "sketch"})
    moved = client.post("/v1/chat/completions", json=_chat("素描", f"{photo_host}/away"))
    assert (moved.status_code, _openai_error(moved)["code"]) == (422, "invalid_parameter")
    assert "cannot be fetched" in _openai_error(moved)["message"]


@pytest.mark.parametrize(
    ("payload", "status", "code"),
    [
        (_chat("", "data:image/jpeg;base64,AAAA"), 422, "invalid_parameter"),
        (_chat("修复", "data:image/jpeg;base64,not base64!"), 422, "invalid_parameter"),
        (_chat("修复", "data:image/jpeg,rawbytes"), 422, "invalid_parameter"),
        (
            _chat("修复", "data:image/jpeg;base64," + base64.b64encode(b"not an image").decode()),
            415,
            "unsupported_image",
        ),
        (_chat("hello", "data:image/jpeg;base64,AAAA"), 422, "instruction_unclear"),
        (_chat("x" * 10_000, "data:image/jpeg;base64,AAAA"), 413, "prompt_too_long"),
        ({"model": "portrait", "messages": []}, 422, "invalid_parameter"),
        ({"model": "portrait", "messages": [{"role": "system", "content": "hi"}]}, 422, "invalid_parameter"),
        ({**_chat("修复", "data:image/jpeg;base64,AAAA"), "n": 2}, 422, "invalid_parameter"),
        (_chat("修复", "data:image/jpeg;base64,AAAA", model="dall-e-3"), 404, "model_not_found"),
    ],
    ids=[
        "empty prompt",
        "bad base64",
        "not base64",
        "not an image",
        "unclear",
        "10 kB",
        "no messages",
        "no user",
        "n=2",
        "unknown model",
    ],
)
def test_chat_bad_inputs_get_openai_errors(client, payload, status, code):
    answer = client.post("/v1/chat/completions", json=payload)
    assert (answer.status_code, _openai_error(answer)["code"]) == (status, code)


def test_a_chat_body_is_refused_by_its_declared_size_and_must_be_json(client, api):
    api.state.settings = api.state.settings.model_copy(update={"max_image_bytes": 1000})
    big = client.post("/v1/chat/completions", json=_chat("修复", "data:image/jpeg;base64," + "A" * 1_400_000))
    assert (big.status_code, _openai_error(big)["code"]) == (413, "image_too_large")
    assert _openai_error(big)["message"].startswith("the request declares ")  # refused before the body was read
    inside = client.post("/v1/chat/completions", json=_chat("修复", "data:image/jpeg;base64," + "A" * 4000))
    assert _openai_error(inside)["message"] == (
        "the data URL holds about 3000 bytes: over the limit for a photo, 1000 bytes "
        "(PORTRAIT_MAX_IMAGE_BYTES raises it)"
    )
    broken = client.post("/v1/chat/completions", content=b"{not json", headers={"Content-Type": "application/json"})
    assert (broken.status_code, _openai_error(broken)["code"]) == (422, "invalid_parameter")


def test_images_edits_bad_inputs_get_openai_errors(client, photo_jpeg):
    image = {"image": ("me.jpg", photo_jpeg, "image/jpeg")}
    cases = [
        ({"prompt": "蓝底一寸", "response_format": "url"}, image, 422, "invalid_parameter", "response_format"),
        ({"prompt": "蓝底一寸", "n": "2"}, image, 422, "invalid_parameter", "n"),
        ({"prompt": "蓝底一寸"}, None, 422, "invalid_parameter", None),
        ({"prompt": ""}, image, 422, "invalid_parameter", "prompt"),
        ({"prompt": "你好"}, image, 422, "instruction_unclear", None),
        ({"prompt": "一寸照", "output_format": "webp"}, image, 422, "invalid_parameter", "format"),
    ]
    for fields, files, status, code, param in cases:
        answer = client.post("/v1/images/edits", data=fields, files=files or {"other": ("x.txt", b"x", "text/plain")})
        error = _openai_error(answer)
        assert (answer.status_code, error["code"], error["param"]) == (status, code, param), fields


def test_a_job_that_finds_no_face_is_an_openai_422(client, faceless_png):
    answer = client.post(
        "/v1/images/edits", data={"prompt": "白底证件照"}, files={"image": ("g.png", faceless_png, "image/png")}
    )
    assert (answer.status_code, _openai_error(answer)["code"]) == (422, "no_face")


def test_models_keep_the_manifest_and_are_an_openai_list(client):
    answer = client.get("/v1/models").json()
    assert answer["object"] == "list"
    ids = [card["id"] for card in answer["data"]]
    assert ids[:4] == ["portrait", "restore", "idphoto", "cartoon"]
    assert {"gpen-bfr-512", "gpen-bfr-256", "dctnet-sketch-head"} <= set(ids)
    for card in answer["data"]:
        assert card["object"] == "model" and card["owned_by"] == "portrait-serve" and isinstance(card["created"], int)
    cards = {card["id"]: card for card in answer["data"]}
    assert (cards["gpen-bfr-256"]["task"], cards["gpen-bfr-256"]["params"]) == ("restore", {"model": "gpen-bfr-256"})
    assert (cards["dctnet-sketch-bg"]["task"], cards["dctnet-sketch-bg"]["params"]) == ("cartoon", {"style": "sketch"})
    assert "face-detect-short" in {model["name"] for model in answer["models"]}
    assert "face-detect-short" not in ids  # a model no client can ask a job of


def test_a_specific_model_fixes_the_jobs_option(client, photo_jpeg):
    answer = client.post(
        "/v1/chat/completions", json=_chat("make it look hand drawn", _data_url(photo_jpeg), "dctnet-3d-bg")
    )
    assert answer.status_code == 200
    assert answer.json()["portrait"]["params"] == {"style": "handdrawn"}  # the prompt's words win over the model's
    plain = client.post("/v1/chat/completions", json=_chat("please", _data_url(photo_jpeg), "dctnet-3d-bg"))
    assert (plain.status_code, plain.json()["portrait"]["params"]) == (200, {"style": "3d"})


def test_a_chat_answer_carries_the_id_photos_print_sheet_and_hd_copy(client, photo_jpeg):
    answer = client.post("/v1/chat/completions", json=_chat("白底证件照 6寸排版 加高清版", _data_url(photo_jpeg)))
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["portrait"]["task"] == "idphoto" and body["portrait"]["params"]["hd"] is True
    content = body["choices"][0]["message"]["content"]
    titles = re.findall(r"!\[([^\]]+)\]\(data:image/jpeg;base64,([A-Za-z0-9+/=]+)\)", content)
    assert [title for title, _ in titles] == ["result", "print sheet", "HD copy"]
    images = {title: Image.open(io.BytesIO(base64.b64decode(data))) for title, data in titles}
    assert images["result"].size == (295, 413)  # cn-1inch, the default standard
    assert min(images["HD copy"].size) >= 600
    assert images["HD copy"].size[1] / images["HD copy"].size[0] == pytest.approx(413 / 295, rel=0.01)
    assert sorted(images["print sheet"].size) == [1200, 1800]  # 6 inch at 300 dpi, whichever way more copies fit
    extra = body["portrait"]
    assert base64.b64decode(extra["hd_b64"]) == base64.b64decode(titles[2][1])
    assert base64.b64decode(extra["sheet_b64"]) == base64.b64decode(titles[1][1])


@pytest.mark.parametrize("prompt", ["蓝底证件照 不要补光", "blue background ID photo, no light correction"])
def test_asking_for_no_lighting_correction_turns_it_off(client, prompt):
    answer = client.post("/v1/instructions", json={"prompt": prompt})
    assert answer.status_code == 200
    assert answer.json()["params"] == {"background": "#628bce", "lighting": "off"}
