"""A folder route can no longer silently watch the wrong folder; each route's state is there for ``/healthz``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from deployments.common.errors import InvalidParameter, ModelUnavailable, StorageError
from serve_app.runner.folders import buckets_root, is_relative_folder, require_input_folders
from serve_app.runner.outcomes import RetryPolicy, Status
from serve_app.runner.routing import BucketRoute, build_routing_table
from serve_app.runner.worker import BucketWorker, job_executor
from storage.local import LocalStore
from tests.stage_doubles import FaceAnalysisDouble

FAST_RETRY = RetryPolicy(max_attempts=2, initial_backoff_s=0.01, max_backoff_s=0.01)


def route(input: str, output: str, name: str = "r") -> BucketRoute:
    return BucketRoute(name=name, input=input, output=output, task="restore")


@pytest.mark.parametrize(
    ("uri", "relative"),
    [("buckets/in", True), ("./in", True), ("/srv/in", False), ("~/in", False), ("file:///srv/in", False)]
    + [("s3://photos/in", False)],
)
def test_which_locations_are_relative_folders(uri, relative):
    assert is_relative_folder(uri) is relative


def test_one_node_may_resolve_relative_folders_in_its_working_directory():
    assert buckets_root([route("buckets/in", "buckets/out")], None, nodes=1) is None


def test_a_cluster_refuses_relative_folders_without_an_absolute_root():
    with pytest.raises(InvalidParameter) as info:
        buckets_root([route("buckets/in", "s3://results/out", name="uploads")], None, nodes=2)
    assert "PORTRAIT_BUCKETS_ROOT is not set on a cluster of 2 nodes" in info.value.message
    assert info.value.details == {"routes": ["uploads"], "nodes": 2}


def test_a_cluster_accepts_s3_and_absolute_routes_and_an_absolute_root():
    assert buckets_root([route("s3://photos/in", "/srv/out")], None, nodes=3) is None
    assert buckets_root([route("buckets/in", "buckets/out")], Path("/mnt/shared"), nodes=3) == Path("/mnt/shared")


def test_a_relative_root_is_refused_everywhere():
    with pytest.raises(InvalidParameter, match="must be an absolute path, got 'shared'"):
        buckets_root([], Path("shared"), nodes=1)


def test_relative_routes_resolve_under_the_root(tmp_path, job_ctx):
    table = build_routing_table([route("buckets/in", "buckets/out")], job_ctx, base_dir=tmp_path)
    assert (table.routes[0].input.bucket, table.routes[0].output.bucket) == (
        str(tmp_path / "buckets" / "in"),
        str(tmp_path / "buckets" / "out"),
    )


def test_a_missing_input_folder_refuses_to_start_and_names_it(tmp_path, job_ctx):
    table = build_routing_table([route("buckets/in", "buckets/out", name="drop")], job_ctx, base_dir=tmp_path)
    with pytest.raises(InvalidParameter) as info:
        require_input_folders(table, node="node-b")
    assert info.value.details == {"missing": [f"drop: {tmp_path / 'buckets' / 'in'}"], "node": "node-b"}
    (tmp_path / "buckets" / "in").mkdir(parents=True)
    require_input_folders(table, node="node-b")  # the output folder is created when the first result is written


class DownBackend(FaceAnalysisDouble):
    """The real backend behind a face analyzer that never comes back (the replicas are lost)."""

    def __init__(self, backend) -> None:
        super().__init__(backend)

    async def analyze_faces(self, image):
        raise ModelUnavailable("FaceAnalyzer has no replica")


def worker_for(tmp_path, backend, job_ctx) -> BucketWorker:
    table = build_routing_table([route(str(tmp_path / "in"), str(tmp_path / "out"))], job_ctx)
    return BucketWorker(table, job_executor(backend, job_ctx), job_ctx, retry=FAST_RETRY, max_concurrency=1)


def test_a_scan_records_when_it_ran_and_what_it_listed(tmp_path, local_backend, job_ctx, photo_jpeg):
    LocalStore(tmp_path / "in").put("a.jpg", photo_jpeg, content_type="image/jpeg")
    worker = worker_for(tmp_path, local_backend, job_ctx)
    assert worker.route_states()["r"].last_scan_at is None
    asyncio.run(worker.reconcile(worker.table.routes[0]))
    state = worker.route_states()["r"]
    assert (state.listed, state.backlog, state.scan_failing, state.last_error) == (1, 0, False, None)
    assert state.last_scan_at is not None
    assert state.to_json()["status"] == "ok"


def test_the_backlog_counts_objects_waiting_and_in_flight(tmp_path, local_backend, job_ctx, photo_jpeg):
    source = LocalStore(tmp_path / "in")
    for name in ("a.jpg", "b.jpg", "c.jpg"):
        source.put(name, photo_jpeg, content_type="image/jpeg")
    worker = worker_for(tmp_path, local_backend, job_ctx)

    async def scenario():
        scan = asyncio.ensure_future(worker.reconcile(worker.table.routes[0]))
        while worker.route_states()["r"].backlog == 0:
            await asyncio.sleep(0.001)
        seen = worker.route_states()["r"].backlog
        await scan
        return seen

    assert asyncio.run(scenario()) == 3
    assert worker.route_states()["r"].backlog == 0


def test_an_object_left_for_the_reconciler_is_the_routes_last_error(tmp_path, local_backend, job_ctx, photo_jpeg):
    LocalStore(tmp_path / "in").put("a.jpg", photo_jpeg, content_type="image/jpeg")
    worker = worker_for(tmp_path, DownBackend(local_backend), job_ctx)
    [outcome] = asyncio.run(worker.reconcile(worker.table.routes[0]))
    assert outcome.status is Status.DEFERRED
    state = worker.route_states()["r"]
    assert state.last_error == "a.jpg: deferred (model_unavailable) after 2 attempts"
    assert state.last_error_at is not None and not state.scan_failing


def test_a_failed_scan_marks_the_route_failing_until_a_scan_succeeds(tmp_path, local_backend, job_ctx):
    (tmp_path / "in").mkdir()
    worker = worker_for(tmp_path, local_backend, job_ctx)
    (tmp_path / "in").rmdir()  # an unmounted share, a deleted folder
    with pytest.raises(StorageError, match="does not exist"):
        asyncio.run(worker.reconcile(worker.table.routes[0]))
    state = worker.route_states()["r"]
    assert state.scan_failing and state.to_json()["status"] == "failing"
    assert state.last_error.startswith(f"scan failed: StorageError('input folder {tmp_path / 'in'} does not exist'")
    (tmp_path / "in").mkdir()
    asyncio.run(worker.reconcile(worker.table.routes[0]))
    assert not worker.route_states()["r"].scan_failing
