"""The jobs API on the Serve app: the ingress stores the job, the BucketRunner deployment runs it, any request sees
it end, and the stored result is the synchronous route's answer."""

from __future__ import annotations

import time

import httpx
import pytest

pytestmark = pytest.mark.slow


def test_a_job_through_serve_ends_with_the_synchronous_routes_bytes(serve_url, astronaut_rgb):
    import cv2

    from deployments.common.image import encode_image

    photo = encode_image(cv2.resize(astronaut_rgb, (192, 192), interpolation=cv2.INTER_AREA), "jpeg")
    files = {"image": ("me.jpg", photo, "image/jpeg")}
    accepted = httpx.post(f"{serve_url}/v1/jobs", files=files, data={"task": "cartoon"}, timeout=120)
    assert accepted.status_code == 202, accepted.text
    status_url = f"{serve_url}{accepted.headers['location']}"
    body = {}
    for _ in range(240):
        body = httpx.get(status_url, timeout=30).json()
        if body["status"] in ("succeeded", "failed"):
            break
        time.sleep(0.5)
    assert body["status"] == "succeeded", body
    stored = httpx.get(f"{status_url}/result", timeout=30)
    sync = httpx.post(f"{serve_url}/v1/cartoon", files=files, timeout=120)
    assert stored.content == sync.content
    assert stored.headers["x-portrait-engine"] == sync.headers["x-portrait-engine"]
    assert [job["id"] for job in httpx.get(f"{serve_url}/v1/jobs", timeout=30).json()["jobs"]] == [body["id"]]
