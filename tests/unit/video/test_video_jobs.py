"""Videos through the asynchronous paths: ``POST /v1/jobs`` and a bucket folder route, the same frames, rate, length
and audio back, the face where it was; refused with a clear 4xx on the synchronous routes and for bad input."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import av
import numpy as np
import pytest

from deployments.common.errors import StageUnavailable
from deployments.faces.types import ANALYZE_FACES
from deployments.video.frames import read_chunks
from deployments.video.probe import VideoLimits, probe_video
from serve_app.runner.outcomes import Status
from serve_app.settings import Settings
from tests.stage_doubles import FaceAnalysisDouble
from tests.unit.runner.bucket_fixtures import make_worker
from tests.unit.video.clips import make_audio_only, make_clip


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> bytes:
    """1 s, 320x240, 25 fps, the astronaut's face crossing and zooming, a 440 Hz tone."""
    return make_clip(tmp_path_factory.mktemp("clip") / "clip.mp4", seconds=1.0).read_bytes()


def _streams(path: Path) -> dict[str, float]:
    with av.open(str(path)) as container:
        return {s.type: float(s.duration * s.time_base) for s in container.streams}


def _face_centre(backend, rgb: np.ndarray) -> np.ndarray:
    faces = asyncio.run(backend.call(ANALYZE_FACES, rgb))
    assert len(faces) == 1
    return np.asarray(faces[0].landmarks, np.float64).mean(axis=0)


def _assert_same_video(source: Path, result: Path, local_backend) -> None:
    info_in, info_out = probe_video(source, VideoLimits()), probe_video(result, VideoLimits())
    assert (info_out.width, info_out.height, info_out.fps, info_out.codec, info_out.audio_codec) == (
        info_in.width,
        info_in.height,
        info_in.fps,
        "h264",
        "aac",
    )
    frames_in = [f for chunk in read_chunks(source, 100) for f in chunk.frames]
    frames_out = [f for chunk in read_chunks(result, 100) for f in chunk.frames]
    assert len(frames_out) == len(frames_in) == 25
    streams_in, streams_out = _streams(source), _streams(result)
    assert streams_out["video"] == pytest.approx(streams_in["video"], abs=1 / 25)
    assert streams_out["audio"] == pytest.approx(streams_in["audio"], abs=0.05)
    for index in (0, 12, 24):  # the face is where it was in the input
        out, given = frames_out[index], frames_in[index]
        moved = np.linalg.norm(_face_centre(local_backend, out) - _face_centre(local_backend, given))
        assert moved < 4.0, (index, moved)


@pytest.mark.parametrize("task", ["restore", "cartoon"])
def test_a_video_job_comes_back_with_the_same_frames_rate_length_audio_and_face_positions(
    jobs_app,
    clip,
    task,
    tmp_path,
    local_backend,
):
    client = jobs_app.client
    accepted = client.post("/v1/jobs", files={"video": ("clip.mp4", clip, "video/mp4")}, data={"task": task})
    assert accepted.status_code == 202, accepted.text
    done = jobs_app.wait(accepted.json()["id"])
    assert done["status"] == "succeeded", done
    meta = done["result"]["meta"]
    assert (done["result"]["media_type"], meta["media_type"], meta["faces"]) == ("video/mp4", "video/mp4", 1)
    video = meta["video"]
    assert (video["frames"], video["fps"], video["tracks"], video["resumed_from_chunk"]) == (25, 25.0, 1, 0)
    assert video["faces_per_frame"] == [1] * 25
    result = client.get(accepted.json()["result_url"])
    assert (result.status_code, result.headers["content-type"]) == (200, "video/mp4")
    source, out = tmp_path / "in.mp4", tmp_path / "out.mp4"
    source.write_bytes(clip)
    out.write_bytes(result.content)
    _assert_same_video(source, out, local_backend)


def test_the_synchronous_routes_refuse_a_video_naming_the_jobs_api(jobs_app, clip):
    answer = jobs_app.client.post("/v1/restore", files={"image": ("clip.mp4", clip, "video/mp4")})
    assert answer.status_code == 415
    assert answer.json()["error"]["code"] == "video_needs_job"
    assert answer.json()["error"]["details"] == {"jobs_url": "/v1/jobs", "task": "restore"}


def test_bad_videos_are_refused_at_submit_with_a_clear_4xx(jobs_app, clip, tmp_path):
    client = jobs_app.client

    def submit(data: bytes, task: str = "restore"):
        return client.post("/v1/jobs", files={"video": ("v.mp4", data, "video/mp4")}, data={"task": task})

    truncated = submit(clip[: len(clip) // 3])
    assert (truncated.status_code, truncated.json()["error"]["code"]) in (
        (400, "corrupt_video"),
        (415, "unsupported_video"),
    )
    audio_only = submit(make_audio_only(tmp_path / "tone.mp4").read_bytes())
    assert (audio_only.status_code, audio_only.json()["error"]["code"]) == (415, "unsupported_video")
    idphoto = submit(clip, task="idphoto")
    assert (idphoto.status_code, idphoto.json()["error"]["code"]) == (415, "unsupported_video")
    huge = make_clip(tmp_path / "huge.mp4", seconds=0.04, width=4096, height=2304, audio=None)
    too_big = submit(huge.read_bytes())
    assert (too_big.status_code, too_big.json()["error"]["code"]) == (413, "video_too_large")
    assert too_big.json()["error"]["details"]["limit"] == "max_frame_pixels"
    assert list(jobs_app.store.refs()) == []  # nothing refused was accepted


def test_a_video_longer_than_the_limit_is_a_413_naming_it(jobs_app, clip):
    jobs_app.client.app.state.settings = Settings(video_max_duration_s=0.5)
    answer = jobs_app.client.post("/v1/jobs", files={"video": ("v.mp4", clip, "video/mp4")}, data={"task": "restore"})
    assert answer.status_code == 413
    assert answer.json()["error"]["details"] == {"limit": "max_duration_s", "value": 1.0, "max": 0.5}


def test_a_bucket_folder_route_turns_a_video_into_a_video_and_a_record(
    tmp_path, clip, local_backend, job_ctx, monkeypatch
):
    """... and stores every MP4 (chunks, the result) from its file, never from bytes read into memory."""
    from storage.local import LocalStore

    put_bytes = LocalStore.put

    def put_no_video(store, key, data, *, content_type, **options):
        assert content_type != "video/mp4", f"{key}: an MP4 put from {len(data)} bytes in memory"
        return put_bytes(store, key, data, content_type=content_type, **options)

    monkeypatch.setattr(LocalStore, "put", put_no_video)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "clip.mp4").write_bytes(clip)
    worker = make_worker(tmp_path, local_backend, job_ctx, task="cartoon")
    outcomes = asyncio.run(worker.reconcile_all())
    assert [(o.key, o.status) for o in outcomes] == [("clip.mp4", Status.DONE)]
    record = json.loads((tmp_path / "out" / "clip.json").read_text())
    assert (record["result_key"], record["meta"]["media_type"]) == ("clip.mp4", "video/mp4")
    video = record["meta"]["video"]
    assert (video["frames"], video["fps"], video["duration_s"], video["tracks"]) == (25, 25.0, 1.0, 1)
    assert set(video["timings_ms"]) == {"decode", "analyze", "frames", "encode", "assemble"}
    _assert_same_video(tmp_path / "in" / "clip.mp4", tmp_path / "out" / "clip.mp4", local_backend)
    leftovers = [path for path in (tmp_path / "out").glob("_work/**/*") if path.is_file()]
    assert leftovers == []  # the chunks are gone once the result is written


class _LosesAReplica(FaceAnalysisDouble):
    """The local backend, except that one face analysis mid-video fails as a lost replica does (503 unavailable)."""

    def __init__(self, backend, fail_at_call: int) -> None:
        super().__init__(backend)
        self._calls, self._fail_at = 0, fail_at_call

    async def analyze_faces(self, image):
        self._calls += 1
        if self._calls == self._fail_at:
            raise StageUnavailable("the FaceAnalyzer replica died under the call")
        return await super().analyze_faces(image)


def test_a_replica_lost_mid_video_is_retried_and_resumes_from_the_last_stored_chunk(
    tmp_path, clip, local_backend, job_ctx
):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "clip.mp4").write_bytes(clip)
    worker = make_worker(tmp_path, _LosesAReplica(local_backend, fail_at_call=20), job_ctx, task="restore")
    outcomes = asyncio.run(worker.reconcile_all())
    assert [(o.key, o.status, o.attempts) for o in outcomes] == [("clip.mp4", Status.DONE, 2)]
    video = json.loads((tmp_path / "out" / "clip.json").read_text())["meta"]["video"]
    assert (video["resumed_from_chunk"], video["frames"], video["faces_per_frame"]) == (1, 25, [1] * 25)
    _assert_same_video(tmp_path / "in" / "clip.mp4", tmp_path / "out" / "clip.mp4", local_backend)


def test_a_cancelled_video_stops_at_its_next_chunk_and_leaves_no_chunk_behind(tmp_path, clip, local_backend, job_ctx):
    """Cancelling a job deletes its input; the video sees that before storing its next chunk and stops there."""
    from serve_app.jobs.video import StoreChunkStore, VideoInput
    from storage.errors import ObjectNotFound
    from storage.local import LocalStore

    source = tmp_path / "clip.mp4"
    source.write_bytes(clip)
    output = LocalStore(tmp_path / "out")
    alive = iter([True, False])  # the input is deleted while the second chunk runs
    chunks = StoreChunkStore.for_object(output, "clip.mp4", tmp_path / "work", lambda: next(alive))
    from serve_app.jobs import parse_job_params, run_job

    params = parse_job_params("restore", {}, job_ctx)
    with pytest.raises(ObjectNotFound):
        asyncio.run(
            run_job(
                local_backend, "restore", VideoInput(source, chunks, result=tmp_path / "result.mp4"), params, job_ctx
            )
        )
    assert [info.key for info in output.list()] == []
