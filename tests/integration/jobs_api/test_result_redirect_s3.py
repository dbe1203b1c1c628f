"""``args.jobs.redirect_from_bytes`` on a real S3 server (SeaweedFS): a large result is read from the store itself,
through a presigned URL, so no ingress holds it for a slow client (docs/BENCHMARKS.md, "Downloading a large
result")."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from tests.integration.conftest import S3Endpoint
from tests.unit.jobs_api.conftest import JobsApp, make_jobs_app

pytestmark = pytest.mark.slow


@contextmanager
def jobs_on_s3(seaweed_s3: S3Endpoint, tmp_path, backend, context, **config) -> Iterator[JobsApp]:
    """The jobs API in-process with its store in a new bucket."""
    bucket = f"jobs-{uuid.uuid4().hex[:12]}"
    seaweed_s3.client().create_bucket(Bucket=bucket)
    app = make_jobs_app(
        tmp_path, backend, context, store=f"s3://{bucket}/jobs", s3=seaweed_s3.store_settings(), **config
    )
    with app.client:
        yield app


def test_a_result_over_the_bar_is_a_redirect_to_the_same_bytes_in_the_store(
    seaweed_s3, tmp_path, local_backend, job_ctx, photo_jpeg
):
    files = {"image": ("me.jpg", photo_jpeg, "image/jpeg")}
    with jobs_on_s3(seaweed_s3, tmp_path, local_backend, job_ctx, redirect_from_bytes=1, redirect_ttl_s=60) as app:
        accepted = app.client.post("/v1/jobs", files=files, data={"task": "cartoon"})
        assert accepted.status_code == 202, accepted.text
        job = app.wait(accepted.json()["id"])
        assert job["status"] == "succeeded", job
        answer = app.client.get(f"/v1/jobs/{job['id']}/result", follow_redirects=False)
        sync = app.client.post("/v1/cartoon", files=files)
    assert answer.status_code == 307 and answer.headers["cache-control"] == "no-store"
    assert (
        answer.headers["location"].startswith(seaweed_s3.endpoint_url)
        and "X-Amz-Signature" in answer.headers["location"]
        and "X-Amz-Expires=60" in answer.headers["location"]
    )
    assert answer.headers["x-portrait-engine"] == sync.headers["x-portrait-engine"]
    from_store = httpx.get(answer.headers["location"], timeout=30)  # no credentials: the URL carries them
    assert from_store.status_code == 200 and from_store.content == sync.content


def test_a_result_under_the_bar_and_a_json_result_still_stream(
    seaweed_s3, tmp_path, local_backend, job_ctx, photo_jpeg
):
    files = {"image": ("me.jpg", photo_jpeg, "image/jpeg")}
    with jobs_on_s3(seaweed_s3, tmp_path, local_backend, job_ctx, redirect_from_bytes=1 << 30) as app:
        small = app.wait(app.client.post("/v1/jobs", files=files, data={"task": "cartoon"}).json()["id"])
        assert app.client.get(f"/v1/jobs/{small['id']}/result", follow_redirects=False).status_code == 200
    with jobs_on_s3(seaweed_s3, tmp_path / "json", local_backend, job_ctx, redirect_from_bytes=1) as app:
        fields = {"task": "cartoon", "return": "json"}
        as_json = app.wait(app.client.post("/v1/jobs", files=files, data=fields).json()["id"])
        answer = app.client.get(f"/v1/jobs/{as_json['id']}/result", follow_redirects=False)
    assert answer.status_code == 200 and answer.json()["image_b64"]  # JSON is answered whole, never redirected
