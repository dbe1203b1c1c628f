"""Hostile videos through the job paths (#32): the caller's broken file is a 4xx record, never our
``internal_error`` after retries; a video refused mid-decode leaves none of its chunks behind; a video job's decoding,
encoding and join run under the job's deadline."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace

import pytest

from deployments.common.errors import RequestTimeout
from deployments.video.probe import VideoLimits
from serve_app.jobs import parse_job_params, run_job
from serve_app.jobs.deadline import _CURRENT, within_deadline
from serve_app.jobs.video import StoreChunkStore, VideoInput
from serve_app.runner.outcomes import Status
from storage.local import LocalStore
from tests.unit.runner.bucket_fixtures import make_worker
from tests.unit.video.crafted import damage_packets, write_mkv, write_torn_pcm


def _grows(tmp_path):
    """20 frames of 64×64 (a first chunk of 16 is stored), then larger ones."""
    return write_mkv(tmp_path / "grows.mkv", [(64, 64, 20), (256, 256, 4)])


def _no_frame(tmp_path):
    return damage_packets(write_mkv(tmp_path / "ok.mkv", [(32, 32, 10)]), "video", from_packet=0)


def _torn_audio(tmp_path):
    """A damaged PCM packet: found at the join, once both chunks are stored."""
    return write_torn_pcm(tmp_path / "torn.mkv", frames=20)


def _audio_at_192_khz(tmp_path):
    return write_mkv(tmp_path / "192k.mkv", [(32, 32, 5)], audio=("pcm_s16le", 192_000, 0.2))


@pytest.mark.parametrize(
    ("make", "status", "code"),
    [
        (_grows, Status.FAILED, "video_too_large"),
        (_no_frame, Status.FAILED, "corrupt_video"),
        (_torn_audio, Status.FAILED, "corrupt_video"),
        (_audio_at_192_khz, Status.DONE, None),
    ],
    ids=["frame over max_frame_pixels mid-stream", "no decodable frame", "damaged audio", "192 kHz PCM"],
)
def test_a_hostile_video_in_a_bucket_gets_its_4xx_record_at_once_and_leaves_no_chunk_behind(
    tmp_path, local_backend, job_ctx, make, status, code
):
    context = replace(job_ctx, video=replace(job_ctx.video, limits=VideoLimits(max_frame_pixels=64 * 64)))
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "clip.mkv").write_bytes(make(tmp_path).read_bytes())
    worker = make_worker(tmp_path, local_backend, context)

    outcomes = asyncio.run(worker.reconcile_all())

    assert [(o.key, o.status, o.code, o.attempts) for o in outcomes] == [("clip.mkv", status, code, 1)]
    leftovers = [path for path in (tmp_path / "out").glob("_work/**/*") if path.is_file()]
    assert leftovers == []
    if code is not None:
        error = json.loads(next((tmp_path / "out").glob("_errors/clip.mkv*")).read_text())["error"]
        assert error["code"] == code


def test_a_video_job_past_its_deadline_does_not_start_the_join(tmp_path, local_backend, job_ctx):
    """The deadline passes as the last chunk is stored (the job stopped, as its time running out does): the join
    is refused. Before, the video's blocking work ran in plain threads and the job went on to write its result."""
    source = write_mkv(tmp_path / "clip.mkv", [(64, 64, 40)])
    output = LocalStore(tmp_path / "out")
    chunks = StoreChunkStore.for_object(output, "clip.mkv", tmp_path / "work")

    def progress(done: float) -> None:
        if done == 1.0:
            _CURRENT.get().stop()

    video = VideoInput(source, chunks, result=tmp_path / "result.mp4", on_progress=progress)
    params = parse_job_params("restore", {}, job_ctx)

    with pytest.raises(RequestTimeout):
        asyncio.run(within_deadline(run_job(local_backend, "restore", video, params, job_ctx), 600))

    assert chunks.finished() == 3  # every chunk done, then no join
    assert not video.result.exists()
