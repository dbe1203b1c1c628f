"""Hostile videos through the job paths (#32): a video job's decoding, encoding and join run under the job's
deadline."""

from __future__ import annotations

import asyncio

import pytest

from deployments.common.errors import RequestTimeout
from serve_app.jobs import parse_job_params, run_job
from serve_app.jobs.deadline import _CURRENT, within_deadline
from serve_app.jobs.video import StoreChunkStore, VideoInput
from storage.local import LocalStore
from tests.unit.video.crafted import write_mkv


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
