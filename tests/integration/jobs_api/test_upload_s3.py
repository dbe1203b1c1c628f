"""A large upload to ``POST /v1/jobs`` with the jobs store on a real S3 server (SeaweedFS): streamed into its temporary
file, then from the file into the store in one PUT (``put_file``: botocore reads the open file, never its bytes),
byte for byte, the temporary file gone after (issue #32, finding 4)."""

from __future__ import annotations

import asyncio
import hashlib
import uuid

import pytest

from serve_app.jobs import JOBS
from serve_app.jobs_api import JobsService
from serve_app.routes import create_api
from serve_app.runner.jobs_config import JobsConfig, within
from serve_app.runner.jobs_store import JobStore
from serve_app.settings import Settings
from storage.base import open_store
from tests.asgi_bodies import MULTIPART, VideoBody, send_chunked
from tests.integration.conftest import S3Endpoint
from tests.unit.jobs_api.test_idempotency import RecordingQueue
from tests.unit.video.clips import make_clip

pytestmark = pytest.mark.slow


def test_a_large_video_goes_from_its_temporary_file_to_s3_byte_for_byte(seaweed_s3: S3Endpoint, tmp_path):
    bucket = f"jobs-{uuid.uuid4().hex[:12]}"
    seaweed_s3.client().create_bucket(Bucket=bucket)
    config = JobsConfig.model_validate({"store": f"s3://{bucket}/jobs", "s3": seaweed_s3.store_settings()})
    store = JobStore(config.location(None), config.s3, JOBS)
    store.prepare()
    queue = RecordingQueue()
    app = create_api()
    uploads = tmp_path / "uploads"
    app.state.settings = Settings(upload_tmp_dir=uploads)
    app.state.jobs = JobsService(config, store, queue)
    video = VideoBody(make_clip(tmp_path / "clip.mp4", seconds=0.4).read_bytes(), 24 * 2**20)  # past 8 MiB: a file

    answer = asyncio.run(send_chunked(app, "/v1/jobs", MULTIPART, video.parts("multipart")))

    assert answer.status == 202, bytes(answer.body)
    inputs = open_store(within(store.location, "in", "restore"), config.s3)
    sha256, md5 = hashlib.sha256(), hashlib.md5()
    with inputs.open_read(queue.queued[0].key) as reader:
        for chunk in reader:
            sha256.update(chunk)
            md5.update(chunk)
    assert sha256.hexdigest() == video.sha256()
    assert reader.info.etag == md5.hexdigest()  # one PUT, not a multipart upload: the ETag is the bytes' MD5
    assert reader.info.user_metadata["portrait-params"] == '{"upscale":"2"}'
    assert list(uploads.iterdir()) == []
