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


def test_two_lora_sets_are_multiplexed_and_each_loaded_once(serve_url, serve_model_store):
    """Requests with LoRAs reach the Renderer by their set (Serve's multiplexed model id): alternating two sets
    loads each once, and a set draws the same image every time; each render streams its steps before its image."""
    import asyncio

    from ray import serve

    from deployments.common.batching import Progress
    from deployments.common.weights import load_manifest
    from deployments.render.types import RENDER, RENDERER, RenderRequest
    from serve_app.handles import handle_backend
    from tests.unit.render.tiny_sdxl import LORA, LORA_B

    handle = serve.get_deployment_handle(RENDERER, app_name="portrait")
    backend = handle_backend({RENDERER: handle}, load_manifest(serve_model_store[1]))
    looks = [
        RenderRequest("a portrait", width=64, height=64, steps=1, seed=5, loras=((name, 1.0),))
        for name in (LORA, LORA, LORA_B, LORA, LORA_B, LORA_B)
    ]

    heard: list[Progress] = []

    async def render_in_turn() -> list[np.ndarray]:
        return [(await backend.call(RENDER, look, on_progress=heard.append)).image for look in looks]

    images = asyncio.run(render_in_turn())
    assert heard == [Progress(1, 1)] * len(looks)  # each render's one step, streamed before its image
    health = handle.health.remote().result()
    assert health["lora_set_loads"] == 2
    assert sorted(health["lora_sets"]) == sorted({look.lora_set for look in looks})
    for image, look in zip(images, looks):
        np.testing.assert_array_equal(image, images[0] if look.loras[0][0] == LORA else images[2])
    assert np.abs(images[0].astype(int) - images[2].astype(int)).max() > 0
