"""The OpenAI SDK examples of docs/compatibility.md against the Serve app itself (the same graph `make run` starts):
the official ``openai`` client with ``base_url=<service>/v1`` lists models, edits an image into an ID photo and gets a
restored photo back from a chat completion, through the ingress and the model deployments."""

from __future__ import annotations

import base64
import io

import openai
import pytest
from PIL import Image

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def client(serve_url) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{serve_url}/v1", api_key="not-checked", max_retries=0, timeout=120)


def test_the_model_list_names_the_jobs_and_the_deployed_models(client):
    ids = [model.id for model in client.models.list()]
    assert ids[:4] == ["portrait", "restore", "idphoto", "cartoon"] and "gfpgan-v1.4" in ids


def test_images_edit_makes_the_id_photo_the_prompt_asks_for(client, two_faces_png, astronaut_rgb):
    from deployments.common.image import encode_image

    portrait = encode_image(astronaut_rgb, "jpeg")
    result = client.images.edit(
        model="portrait", image=("me.jpg", portrait, "image/jpeg"), prompt="白底二寸证件照", response_format="b64_json"
    )
    photo = Image.open(io.BytesIO(base64.b64decode(result.data[0].b64_json)))
    assert photo.size == (413, 579)  # the 二寸 preset at 300 dpi
    assert result.data[0].revised_prompt.startswith("已完成：证件照")


def test_chat_completion_restores_the_photo_with_the_deployed_gpen(client, two_faces_png):
    data_url = "data:image/png;base64," + base64.b64encode(two_faces_png).decode("ascii")
    completion = client.chat.completions.create(
        model="portrait",
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "修复这张老照片"},
                    {"type": "image_url", "image_url": {"url": data_url}},
                ],
            }
        ],
    )
    content = completion.choices[0].message.content
    image_part, _, summary = content.partition("\n\n")
    assert image_part.startswith("![result](data:image/png;base64,")
    restored = Image.open(io.BytesIO(base64.b64decode(image_part.split(",", 1)[1].removesuffix(")"))))
    assert restored.size == (1024, 600)
    assert "gpen" in summary  # the serve store holds GPEN-512 weights: the default model is the first with weights
