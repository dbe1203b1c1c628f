"""The portrait job through Ray Serve on tiny random SDXL parts: the candidates of one request reach the Renderer
together and are drawn in one pipeline call (the session's Renderer batches up to 4)."""

from __future__ import annotations

import httpx
import numpy as np

from deployments.common.image import encode_image


def test_four_candidates_of_one_request_are_one_pipeline_call(serve_url, astronaut_rgb):
    photo = encode_image(np.ascontiguousarray(astronaut_rgb[:320, 60:380]), "png")
    fields = {"return": "json", "width": "256", "height": "256", "steps": "2", "count": "4", "seed": "3"}
    answer = httpx.post(
        f"{serve_url}/v1/portrait", files={"image": ("me.png", photo, "image/png")}, data=fields, timeout=600
    )
    assert answer.status_code == 200, answer.text
    report = answer.json()["meta"]["report"]["portrait"]
    assert report["batch_size"] == 4
    assert [candidate["seed"] for candidate in report["candidates"]] == [3, 4, 5, 6]
    assert "diffusers-sdxl" in answer.json()["meta"]["engine"]
