"""The ``openai`` SDK examples of docs/compatibility.md, unchanged, against the API served by uvicorn on 127.0.0.1
(the real engines in-process behind it): models, images.edit, chat.completions with and without streaming, and the
SDK's errors."""

from __future__ import annotations

import base64
import io

import numpy as np
import openai
import pytest
from PIL import Image

from tests.served import served


@pytest.fixture
def base_url(api):
    """``http://127.0.0.1:PORT/v1``: the app served for the length of one test."""
    with served(api) as url:
        yield f"{url}/v1"


@pytest.fixture
def client(base_url):
    return openai.OpenAI(base_url=base_url, api_key="not-checked", max_retries=0)


def _image(data: bytes) -> Image.Image:
    return Image.open(io.BytesIO(data))


def _data_url(photo: bytes) -> str:
    return "data:image/jpeg;base64," + base64.b64encode(photo).decode("ascii")


def test_models_list(client):
    ids = [model.id for model in client.models.list()]
    assert ids[:4] == ["portrait", "restore", "idphoto", "cartoon"] and "gpen-bfr-256" in ids


def test_images_edit_makes_the_id_photo_the_prompt_asks_for(client, photo_jpeg):
    result = client.images.edit(
        model="portrait",
        image=("me.jpg", photo_jpeg, "image/jpeg"),
        prompt="蓝底一寸证件照",
        response_format="b64_json",
        n=1,
    )
    photo = _image(base64.b64decode(result.data[0].b64_json))
    assert (photo.format, photo.size) == ("JPEG", (295, 413))  # the 一寸 preset, at its pixels
    corner = np.asarray(photo.convert("RGB"))[:6, :6].reshape(-1, 3).mean(axis=0)
    assert np.abs(corner - [0x62, 0x8B, 0xCE]).max() < 12  # 蓝底: the blue background
    assert result.data[0].revised_prompt.startswith("已完成：证件照（spec=cn-1inch, background=#628bce）")
    assert (result.size, result.output_format) == ("295x413", "jpeg")


def test_chat_completion_answers_the_result_as_a_markdown_image(client, photo_jpeg):
    completion = client.chat.completions.create(
        model="portrait",
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "cartoonize me as a pencil sketch"},
                    {"type": "image_url", "image_url": {"url": _data_url(photo_jpeg)}},
                ],
            }
        ],
    )
    message = completion.choices[0].message
    assert (message.role, completion.choices[0].finish_reason, completion.object) == (
        "assistant",
        "stop",
        "chat.completion",
    )
    image_part, _, summary = message.content.partition("\n\n")
    assert image_part.startswith("![result](data:image/png;base64,") and image_part.endswith(")")
    cartoon = _image(base64.b64decode(image_part.removeprefix("![result](data:image/png;base64,").removesuffix(")")))
    assert (cartoon.format, cartoon.size) == ("PNG", (256, 256))
    assert summary.startswith("Done: cartoon (style=sketch). Engine ")


def test_chat_completion_streams_the_same_answer(client, photo_jpeg):
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "修复这张老照片并放大两倍"},
                {"type": "image_url", "image_url": {"url": _data_url(photo_jpeg)}},
            ],
        }
    ]
    chunks = list(client.chat.completions.create(model="gpen-bfr-256", messages=messages, stream=True))
    content = "".join(chunk.choices[0].delta.content or "" for chunk in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [chunk.choices[0].finish_reason for chunk in chunks][-1] == "stop"
    image_part, _, summary = content.partition("\n\n")
    restored = _image(base64.b64decode(image_part.removeprefix("![result](data:image/jpeg;base64,").removesuffix(")")))
    assert restored.size == (512, 512)  # 256 px, upscaled twice
    assert summary.startswith("已完成：照片修复（model=gpen-bfr-256, upscale=2）")


def test_the_sdk_raises_the_services_error_codes(client, photo_jpeg):
    with pytest.raises(openai.BadRequestError) as no_image:
        client.chat.completions.create(model="portrait", messages=[{"role": "user", "content": "蓝底一寸证件照"}])
    assert no_image.value.code == "image_required"
    remote = [
        {"type": "text", "text": "修复"},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.jpg"}},
    ]
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="portrait", messages=[{"role": "user", "content": remote}])
    assert refused.value.code == "remote_image_refused"
    with pytest.raises(openai.UnprocessableEntityError) as unclear:
        client.images.edit(image=("me.jpg", photo_jpeg, "image/jpeg"), prompt="make it nice")
    assert unclear.value.code == "instruction_unclear"
    with pytest.raises(openai.NotFoundError) as unknown:
        client.images.edit(model="dall-e-2", image=("me.jpg", photo_jpeg, "image/jpeg"), prompt="修复")
    assert unknown.value.code == "model_not_found"
