"""The webhook through Serve: a MinIO-shaped event for the local-folder route of ``configs/local.yaml`` → result."""

from __future__ import annotations

import json
import time

import cv2
import httpx
import pytest

from deployments.common.image import encode_image
from tests.unit.runner.bucket_samples import minio_body

pytestmark = pytest.mark.slow

RESULT_TIMEOUT_S = 90


def test_a_minio_event_for_the_folder_route_produces_a_result(
    serve_url, serve_buckets_root, serve_events_token, astronaut_rgb
):
    inbox, outbox = serve_buckets_root / "buckets" / "in", serve_buckets_root / "buckets" / "out"
    (inbox / "trip").mkdir(parents=True, exist_ok=True)
    small = cv2.resize(astronaut_rgb, (256, 256), interpolation=cv2.INTER_AREA)
    (inbox / "trip" / "my photo.jpg").write_bytes(encode_image(small, "jpeg"))  # dropped in by hand
    answer = httpx.post(
        f"{serve_url}/v1/events/s3",
        json=minio_body("in", "trip/my+photo.jpg"),
        headers={"Authorization": f"Bearer {serve_events_token}"},
        timeout=30,
    )
    assert (answer.status_code, answer.json()) == (200, {"received": 1, "accepted": 1})
    record_path = outbox / "trip" / "my photo.json"
    deadline = time.monotonic() + RESULT_TIMEOUT_S
    while not record_path.exists() and time.monotonic() < deadline:
        time.sleep(0.25)
    record = json.loads(record_path.read_text(encoding="utf-8"))
    assert (record["route"], record["task"], record["source"]["key"]) == (
        "restore-folder",
        "restore",
        "trip/my photo.jpg",
    )
    assert record["meta"]["faces"] == 1 and record["meta"]["engine"] == "gpen"  # the session's tiny GPEN
    assert (outbox / "trip" / "my photo.jpg").stat().st_size > 0


def test_a_wrong_token_is_refused_with_json(serve_url):
    answer = httpx.post(
        f"{serve_url}/v1/events/s3",
        json=minio_body("in", "a.jpg"),
        headers={"Authorization": "Bearer nope"},
        timeout=30,
    )
    assert answer.status_code == 401
    assert answer.json() == {
        "error": {"code": "unauthorized", "message": "missing or wrong bearer token for bucket events"}
    }


def test_head_is_minios_liveness_probe(serve_url):
    assert httpx.head(f"{serve_url}/v1/events/s3", timeout=30).status_code == 200
