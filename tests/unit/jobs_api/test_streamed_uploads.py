"""An upload to ``POST /v1/jobs`` is streamed, never held whole in the ingress (issue #32, finding 4): a video of the
512 MiB class costs the ingress a few MiB whether it comes as multipart or as JSON base64 (measured here with a
64 MiB one; ``bench/memory_upload.py`` measures 512 MiB), the stored input is the bytes sent, the process admits
bodies by bytes in flight (503 ``overloaded`` past ``PORTRAIT_MAX_UPLOAD_BYTES_IN_FLIGHT``, admitted again once they
are released), and the temporary files are gone after a success, an error and a client that left.

The bodies are generated as they are sent (a short clip padded with an MP4 ``free`` box of zeros), never built whole
in the test process, so the peak traced here is the app's."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import tracemalloc
from pathlib import Path

import pytest

from serve_app.jobs import JOBS
from serve_app.jobs_api import JobsService
from serve_app.routes import create_api
from serve_app.runner.jobs_config import JobsConfig, within
from serve_app.runner.jobs_store import JobStore
from serve_app.settings import Settings
from storage.base import open_store
from tests.asgi_bodies import MULTIPART, Hold, VideoBody, send_chunked, send_held
from tests.unit.jobs_api.test_idempotency import RecordingQueue
from tests.unit.video.clips import make_clip

MIB = 2**20
SHAPES = {"multipart": MULTIPART, "json": "application/json"}
TRACED_PEAK_BYTES = 16 * MIB  # what a 64 MiB upload may cost the app (the body itself: 64 MiB, or 85 MiB of base64)


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> bytes:
    """0.4 s, 320x240: what the padding makes a video of any size."""
    return make_clip(tmp_path_factory.mktemp("clip") / "clip.mp4", seconds=0.4).read_bytes()


@pytest.fixture
def uploads(tmp_path, monkeypatch) -> Path:
    """The uploads' temporary folder (``PORTRAIT_UPLOAD_TMP_DIR``), empty."""
    folder = tmp_path / "uploads"
    folder.mkdir()
    monkeypatch.setenv("PORTRAIT_UPLOAD_TMP_DIR", str(folder))
    return folder


def jobs_api(tmp_path: Path) -> tuple:
    """The app with the jobs API over a folder store; the jobs are queued, never run (the ingress is measured)."""
    config = JobsConfig.model_validate({"store": str(tmp_path / "jobs")})
    store = JobStore(config.location(None), config.s3, JOBS)
    store.prepare()
    queue = RecordingQueue()
    app = create_api()
    app.state.settings = Settings()  # after the test's environment: PORTRAIT_UPLOAD_* and the budget
    app.state.jobs = JobsService(config, store, queue)
    return app, store, queue


def stored_input_sha256(store: JobStore, queue: RecordingQueue, task: str = "restore") -> str:
    digest = hashlib.sha256()
    with open_store(within(store.location, "in", task)).open_read(queue.queued[-1].key) as reader:
        for chunk in reader:
            digest.update(chunk)
    return digest.hexdigest()


@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_large_video_upload_costs_the_ingress_far_less_than_the_video_and_is_stored_byte_for_byte(
    tmp_path, uploads, clip, shape
):
    video = VideoBody(clip, 64 * MIB)
    app, store, queue = jobs_api(tmp_path)

    tracemalloc.start()
    try:
        answer = asyncio.run(send_chunked(app, "/v1/jobs", SHAPES[shape], video.parts(shape)))
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert answer.status == 202, bytes(answer.body)
    assert peak_bytes < TRACED_PEAK_BYTES, f"the ingress held {peak_bytes / MIB:.0f} MiB for a 64 MiB video"
    assert stored_input_sha256(store, queue) == video.sha256()
    record = store.record(queue.queued[0])
    assert record is not None and record.input_bytes == video.size_bytes
    assert record.params == {"upscale": 2} if shape == "json" else {"upscale": "2"}
    assert list(uploads.iterdir()) == []  # the temporary file is gone once the job is stored


@pytest.mark.parametrize(
    ("shape", "content_type", "body"),
    [
        ("raw", "image/jpeg", lambda photo: photo),
        ("json", "application/json", lambda photo: b'{"image_b64": "%s"}' % base64.b64encode(photo)),
    ],
)
def test_a_small_upload_stays_in_memory_and_is_stored_byte_for_byte(
    tmp_path, uploads, photo_jpeg, shape, content_type, body
):
    app, store, queue = jobs_api(tmp_path)
    sent = body(photo_jpeg)

    answer = asyncio.run(send_chunked(app, "/v1/jobs?task=restore", content_type, iter([sent[:100], sent[100:]])))

    assert answer.status == 202, bytes(answer.body)
    assert stored_input_sha256(store, queue) == hashlib.sha256(photo_jpeg).hexdigest()


def test_the_bytes_in_flight_budget_refuses_the_upload_that_would_pass_it_and_admits_again_once_released(
    tmp_path, uploads, clip, monkeypatch
):
    monkeypatch.setenv("PORTRAIT_MAX_UPLOAD_BYTES_IN_FLIGHT", str(4 * MIB))
    app, store, queue = jobs_api(tmp_path)
    first, second = VideoBody(clip, 3 * MIB), VideoBody(clip, 3 * MIB)

    async def scenario():
        hold = Hold(after_bytes=2 * MIB)
        held = asyncio.create_task(send_held(app, "/v1/jobs", MULTIPART, first.parts("multipart"), hold))
        await hold.reached.wait()  # the first upload holds 2 MiB of the 4
        refused = await send_chunked(app, "/v1/jobs", MULTIPART, second.parts("multipart"))
        in_flight_then = app.state.upload_budget.in_flight
        hold.resume.set()
        accepted_first = await held
        after = await send_chunked(app, "/v1/jobs", MULTIPART, second.parts("multipart"))
        return refused, in_flight_then, accepted_first, after

    refused, in_flight_then, accepted_first, after = asyncio.run(scenario())

    error = refused.json()["error"]
    assert (refused.status, error["code"]) == (503, "overloaded")
    assert "PORTRAIT_MAX_UPLOAD_BYTES_IN_FLIGHT" in error["message"]
    assert refused.bytes_read < 3 * MIB  # refused as its bytes came, not after all of them
    assert 2 * MIB <= in_flight_then <= 2 * MIB + 64 * 1024  # the refused upload's bytes were released at once
    assert accepted_first.status == 202 and after.status == 202, (bytes(accepted_first.body), bytes(after.body))
    assert app.state.upload_budget.in_flight == 0
    assert len(queue.queued) == 2


def test_the_refusal_past_the_budget_says_when_to_retry(tmp_path, uploads, clip, monkeypatch):
    monkeypatch.setenv("PORTRAIT_MAX_UPLOAD_BYTES_IN_FLIGHT", str(MIB))
    app, _, _ = jobs_api(tmp_path)
    app.state.upload_budget.in_flight = MIB  # another request holds the whole budget
    answer = asyncio.run(send_chunked(app, "/v1/jobs", MULTIPART, VideoBody(clip, 2 * MIB).parts("multipart")))
    assert answer.status == 503
    assert answer.json()["error"]["details"]["retry_after_s"] == 5


def test_one_upload_larger_than_the_whole_budget_is_taken_when_nothing_else_is_in_flight(
    tmp_path, uploads, clip, monkeypatch
):
    monkeypatch.setenv("PORTRAIT_MAX_UPLOAD_BYTES_IN_FLIGHT", str(MIB))
    app, _, queue = jobs_api(tmp_path)
    answer = asyncio.run(send_chunked(app, "/v1/jobs", MULTIPART, VideoBody(clip, 3 * MIB).parts("multipart")))
    assert answer.status == 202, bytes(answer.body)
    assert app.state.upload_budget.in_flight == 0


def test_a_refused_upload_leaves_no_temporary_file(tmp_path, uploads, clip):
    app, store, queue = jobs_api(tmp_path)
    video = VideoBody(clip, 12 * MIB)  # past the 8 MiB kept in memory: a temporary file

    parts = video.parts("multipart", task="idphoto", upscale=None)
    answer = asyncio.run(send_chunked(app, "/v1/jobs", MULTIPART, parts))

    assert answer.status == 415, bytes(answer.body)  # refused once stored to the file: an ID photo takes no video
    assert list(uploads.iterdir()) == [] and queue.queued == []
    assert app.state.upload_budget.in_flight == 0


@pytest.mark.parametrize("leaves", ["disconnect", "cancelled"])
def test_a_client_that_leaves_mid_upload_releases_its_bytes_and_its_temporary_file(
    tmp_path, uploads, clip, monkeypatch, leaves
):
    monkeypatch.setenv("PORTRAIT_UPLOAD_MEMORY_BYTES", str(MIB))
    app, store, queue = jobs_api(tmp_path)
    video = VideoBody(clip, 8 * MIB)

    async def scenario():
        hold = Hold(after_bytes=4 * MIB, leave=leaves == "disconnect")
        sending = asyncio.create_task(send_held(app, "/v1/jobs", MULTIPART, video.parts("multipart"), hold))
        await hold.reached.wait()
        for _ in range(100):  # the spool writes its batches in a worker thread
            if any(uploads.iterdir()) or sending.done():
                break
            await asyncio.sleep(0.01)
        files_then = len(list(uploads.iterdir()))
        if leaves == "cancelled":  # as Serve cancels a request whose client went away
            sending.cancel()
        hold.resume.set()  # "disconnect": the client leaves now
        await asyncio.gather(sending, return_exceptions=True)
        return files_then

    files_then = asyncio.run(scenario())

    assert files_then == 1  # the upload was in its temporary file when the client left
    assert list(uploads.iterdir()) == [] and queue.queued == []
    assert app.state.upload_budget.in_flight == 0
