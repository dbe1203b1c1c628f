"""Formal clothes on the ID photo through its route (#35, tier 0): ``attire`` dresses the person before the framing,
the face stays the person's own, and ``GET /v1/idphoto/attire`` lists the templates."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from tests.unit.serve_app.test_job_routes import client_for


@pytest.fixture(scope="module")
def client(local_backend):
    return client_for(local_backend)


def idphoto(client, photo: bytes, **fields):
    return client.post(
        "/v1/idphoto", files={"image": ("me.jpg", photo, "image/jpeg")}, data={"spec": "cn-2inch", **fields}
    )


def test_the_templates_are_listed_with_titles_colours_and_tiers(client):
    templates = client.get("/v1/idphoto/attire").json()["attire"]
    names = [template["name"] for template in templates]
    assert names[:6] == ["suit-tie", "suit", "women-suit", "white-shirt", "blouse", "school-uniform"]
    assert all(
        template["title"]["zh"] and template["colours"] and template["tiers"] == [0, 1] for template in templates
    )


def test_a_suit_changes_the_clothes_and_keeps_the_face(client, photo_jpeg):
    plain, dressed = idphoto(client, photo_jpeg), idphoto(client, photo_jpeg, attire="suit-tie", attire_color="navy")
    assert plain.status_code == dressed.status_code == 200, dressed.text
    before, after = (np.asarray(Image.open(io.BytesIO(a.content)).convert("RGB")).astype(int) for a in (plain, dressed))
    height = before.shape[0]
    top, bottom = slice(0, int(height * 0.55)), slice(int(height * 0.85), height)
    assert np.abs(after[top] - before[top]).mean() < 2  # the head (JPEG: not bit for bit through the encoder)
    assert np.abs(after[bottom] - before[bottom]).mean() > 10  # the clothes


@pytest.mark.parametrize(
    "fields", [{"attire": "tuxedo"}, {"attire": "suit-tie", "attire_color": "pink"}, {"attire_color": "navy"}]
)
def test_an_unknown_attire_or_colour_is_a_422_naming_the_choices(client, photo_jpeg, fields):
    answer = idphoto(client, photo_jpeg, **fields)
    assert answer.status_code == 422 and answer.json()["error"]["code"] == "invalid_parameter", answer.text
