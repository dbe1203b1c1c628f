"""A video over its byte cap is refused as a video wherever it comes in: 413 ``video_too_large`` naming the cap in
MiB and ``PORTRAIT_MAX_VIDEO_BYTES`` on the asynchronous paths (``POST /v1/jobs`` bodies, bucket objects), 415
``video_needs_job`` where videos are not taken; a photo keeps ``image_too_large`` and its own cap everywhere."""

from __future__ import annotations

import asyncio
import base64
import json
from dataclasses import replace
from itertools import chain

import pytest

from deployments.common.errors import VideoNeedsJob, VideoTooLarge
from serve_app.byte_caps import PHOTO_SETTING, VIDEO_SETTING, media_caps
from serve_app.chat_messages import image_from_url
from serve_app.instructions import InstructionsConfig
from serve_app.jobs.video import check_media
from serve_app.runner.outcomes import Status
from serve_app.settings import Settings
from serve_app.uploads import FORM_OVERHEAD_BYTES
from tests.asgi_bodies import CHUNK_BYTES, filler, json_parts, multipart_parts, send_chunked
from tests.unit.jobs_api.conftest import make_jobs_app
from tests.unit.runner.bucket_fixtures import make_worker

MP4_HEAD = b"\x00\x00\x00\x18ftypisom\x00\x00\x02\x00isomiso2"  # an MP4's first box: 24 bytes, 8 base64 quanta
PHOTO_CAP, VIDEO_CAP = 2**20, 3 * 2**20
SENT_BYTES = 60_000_000  # what the client would send: far past every cap
VIDEO_DETAILS = {"limit": "max_video_bytes", "max_bytes": VIDEO_CAP, "setting": "PORTRAIT_MAX_VIDEO_BYTES"}
SHAPES = {  # content type, the parts of a body carrying SENT_BYTES that begin with `head`, the shape's growth
    "raw": ("video/mp4", lambda head: chain([head], filler(SENT_BYTES - len(head))), lambda cap: cap),
    "multipart": (
        "multipart/form-data; boundary=b0undary",
        lambda head: multipart_parts(SENT_BYTES, head=head),
        lambda cap: cap + FORM_OVERHEAD_BYTES,
    ),
    "json": (
        "application/json",
        lambda head: json_parts(SENT_BYTES, head=head),
        lambda cap: cap * 4 // 3 + 4 + FORM_OVERHEAD_BYTES,
    ),
}


@pytest.fixture
def app(tmp_path, local_backend, job_ctx):
    """The routes with the jobs API, caps of 1 MiB (photo) and 3 MiB (video)."""
    api = make_jobs_app(tmp_path, local_backend, job_ctx).client.app
    api.state.settings = Settings(max_image_bytes=PHOTO_CAP, max_video_bytes=VIDEO_CAP)
    return api


def _send(app, path: str, shape: str, head: bytes, headers: dict[str, str] | None = None):
    content_type, parts, _ = SHAPES[shape]
    return asyncio.run(send_chunked(app, path, content_type, parts(head), headers=headers))


@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_video_over_its_cap_on_the_jobs_api_is_a_413_video_too_large_naming_the_cap_and_setting(app, shape):
    answer = _send(app, "/v1/jobs", shape, MP4_HEAD)

    error = answer.json()["error"]
    assert (answer.status, error["code"], error["details"]) == (413, "video_too_large", VIDEO_DETAILS)
    assert error["message"].endswith(": over the limit for a video, 3 MiB (PORTRAIT_MAX_VIDEO_BYTES raises it)")
    body_cap = SHAPES[shape][2](VIDEO_CAP)
    assert body_cap < answer.bytes_read <= body_cap + CHUNK_BYTES  # refused at the video's cap, not read whole


def test_a_photo_on_the_jobs_api_is_read_only_to_the_photo_cap_and_keeps_image_too_large(app):
    answer = _send(app, "/v1/jobs", "raw", b"\x89PNG\r\n\x1a\n")

    error = answer.json()["error"]
    assert (answer.status, error["code"]) == (413, "image_too_large")
    assert error["details"] == {
        "limit": "max_image_bytes",
        "max_bytes": PHOTO_CAP,
        "setting": "PORTRAIT_MAX_IMAGE_BYTES",
    }
    assert error["message"].endswith(": over the limit for a photo, 1 MiB (PORTRAIT_MAX_IMAGE_BYTES raises it)")
    assert PHOTO_CAP < answer.bytes_read <= PHOTO_CAP + CHUNK_BYTES  # not to the larger video cap


@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_video_over_the_photo_cap_on_a_synchronous_route_is_a_415_video_needs_job(app, shape):
    answer = _send(app, "/v1/restore", shape, MP4_HEAD)

    error = answer.json()["error"]
    assert (answer.status, error["code"], error["details"]) == (415, "video_needs_job", {"jobs_url": "/v1/jobs"})
    body_cap = SHAPES[shape][2](PHOTO_CAP)
    assert body_cap < answer.bytes_read <= body_cap + CHUNK_BYTES


def test_a_declared_length_over_the_cap_is_refused_once_the_first_bytes_tell_a_video(app):
    answer = _send(app, "/v1/jobs", "raw", MP4_HEAD, headers={"content-length": str(SENT_BYTES)})

    error = answer.json()["error"]
    assert (answer.status, error["code"], error["details"]) == (413, "video_too_large", VIDEO_DETAILS)
    assert error["message"].startswith(f"the request declares {SENT_BYTES} bytes: over the limit for a video")
    assert answer.bytes_read <= len(MP4_HEAD) + CHUNK_BYTES  # its first bytes, not the body


@pytest.mark.parametrize("photo_cap", [20 * 2**20, 1000], ids=["checked after reading", "refused by the store"])
def test_a_video_object_over_its_cap_gets_a_video_too_large_record(tmp_path, local_backend, job_ctx, photo_cap):
    """Under the larger cap the object is read, then held to its kind's; over both, the store refuses it and its
    first bytes say it is a video."""
    context = replace(
        job_ctx, limits=replace(job_ctx.limits, max_bytes=photo_cap), video=replace(job_ctx.video, max_bytes=4000)
    )
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "clip.mp4").write_bytes(MP4_HEAD + bytes(5000))
    worker = make_worker(tmp_path, local_backend, context)

    outcomes = asyncio.run(worker.reconcile_all())

    assert [(o.key, o.status, o.code) for o in outcomes] == [("clip.mp4", Status.FAILED, "video_too_large")]
    error = json.loads(next((tmp_path / "out").glob("_errors/clip.mp4*")).read_text())["error"]
    assert error["details"] == {"limit": "max_video_bytes", "max_bytes": 4000, "setting": "PORTRAIT_MAX_VIDEO_BYTES"}


def test_a_video_is_held_to_the_video_cap_even_when_the_photo_cap_is_larger(job_ctx):
    context = replace(
        job_ctx, limits=replace(job_ctx.limits, max_bytes=10_000), video=replace(job_ctx.video, max_bytes=4000)
    )

    with pytest.raises(VideoTooLarge) as refused:
        check_media("restore", MP4_HEAD + bytes(5000), context)

    assert refused.value.message == (
        "the upload has 5024 bytes: over the limit for a video, 4000 bytes (PORTRAIT_MAX_VIDEO_BYTES raises it)"
    )


def test_a_video_data_url_where_videos_are_not_taken_is_a_video_needs_job():
    url = "data:video/mp4;base64," + base64.b64encode(MP4_HEAD + bytes(3000)).decode()

    with pytest.raises(VideoNeedsJob):
        asyncio.run(image_from_url(url, InstructionsConfig(), media_caps(1000, None)))


def test_the_caps_name_settings_that_exist():
    assert {PHOTO_SETTING, VIDEO_SETTING} <= set(Settings.model_fields)


@pytest.mark.parametrize("photo_cap", [20 * 2**20, 1000], ids=["checked after reading", "refused by the store"])
def test_a_video_input_key_over_its_cap_is_a_413_video_too_large(tmp_path, local_backend, job_ctx, photo_cap):
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    (inputs / "clip.mp4").write_bytes(MP4_HEAD + bytes(5000))
    jobs = make_jobs_app(tmp_path, local_backend, job_ctx, input_store=str(inputs))
    jobs.client.app.state.settings = Settings(max_image_bytes=photo_cap, max_video_bytes=4000)

    with jobs.client:
        answer = jobs.client.post("/v1/jobs", json={"task": "restore", "input": "clip.mp4"})

    error = answer.json()["error"]
    assert (answer.status_code, error["code"]) == (413, "video_too_large")
    assert error["details"] == {"limit": "max_video_bytes", "max_bytes": 4000, "setting": "PORTRAIT_MAX_VIDEO_BYTES"}
    assert list(jobs.store.refs()) == []  # nothing refused was accepted
