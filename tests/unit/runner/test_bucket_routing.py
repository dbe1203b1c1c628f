"""Routes as data: matching, start-up validation (tasks, params, loops), per-object params from metadata."""

from __future__ import annotations

import json

import pytest

from deployments.common.errors import InvalidParameter
from serve_app.runner.routing import BucketRoute, build_routing_table, object_params


def route(name="r", input="s3://photos/in", output="s3://results/out", task="restore", **more) -> dict:
    return {"name": name, "input": input, "output": output, "task": task, **more}


def test_match_finds_the_route_and_the_key_relative_to_its_prefix(job_ctx):
    table = build_routing_table(
        [route(), route("id", input="s3://photos/id", output="s3://results/id", task="idphoto")], job_ctx
    )
    (match,) = table.match("photos", "in/sub/Cat.JPG")
    assert (match.route.name, match.key) == ("r", "sub/Cat.JPG")
    assert [m.route.name for m in table.match("photos", "id/a.png")] == ["id"]
    assert table.match("photos", "in/notes.txt") == []  # suffix filter
    assert table.match("photos", "inbox/a.jpg") == []  # "in" is a folder prefix, not a string prefix
    assert table.match("other", "in/a.jpg") == []


def test_one_upload_may_fan_out_to_several_routes(job_ctx):
    table = build_routing_table(
        [route("a", output="s3://results/a"), route("b", output="s3://results/b", task="idphoto")], job_ctx
    )
    assert [m.route.name for m in table.match("photos", "in/x.jpg")] == ["a", "b"]


def test_local_folders_match_events_by_folder_name_or_event_bucket(job_ctx, tmp_path):
    table = build_routing_table(
        [
            route(input=str(tmp_path / "in"), output=str(tmp_path / "out")),
            route("other", input="drop", output="done", event_bucket="uploads"),
        ],
        job_ctx,
        base_dir=tmp_path,
    )
    assert [m.key for m in table.match("in", "a/b.png")] == ["a/b.png"]
    assert table.routes[1].input.bucket == str(tmp_path / "drop")
    assert [m.route.name for m in table.match("uploads", "x.jpg")] == ["other"]
    assert [r.poll for r in table.routes] == [True, True]
    assert build_routing_table([route()], job_ctx).routes[0].poll is False


@pytest.mark.parametrize(
    ("routes", "message"),
    [
        ([route(output="s3://photos/in/results")], "its results would trigger it again"),
        ([route(output="s3://photos")], "its results would trigger it again"),
        ([route(input="s3://photos", output="s3://photos/out")], "its results would trigger it again"),
        ([route("a"), route("b", input="s3://results/out", output="s3://final/x")], "'a' writes to s3://results/out"),
        ([route("a"), route("b", input="s3://other/in")], "overlapping outputs"),
        ([route("a"), route("a", output="s3://results/other")], "duplicate route names"),
        ([route(task="paint")], "unknown task 'paint'"),
        ([route(params={"upscale": 3})], "route 'r': invalid params: upscale"),
        ([route(params={"colour": "red"})], "colour"),
        ([route(input="ftp://x/y")], "unsupported storage scheme"),
    ],
)
def test_bad_routes_are_refused_at_start_up(job_ctx, routes, message):
    with pytest.raises(InvalidParameter, match=message):
        build_routing_table(routes, job_ctx)


def test_the_loop_check_covers_local_folders(job_ctx, tmp_path):
    with pytest.raises(InvalidParameter, match="would trigger it again"):
        build_routing_table([route(input=str(tmp_path), output=str(tmp_path / "out"))], job_ctx)


def test_outputs_beside_the_input_in_the_same_bucket_are_fine(job_ctx):
    table = build_routing_table([route(output="s3://photos/out")], job_ctx)
    assert str(table.routes[0].output) == "s3://photos/out"


def test_an_input_whose_suffixes_no_result_has_may_share_the_output(job_ctx):
    table = build_routing_table([route(input="s3://photos/raw", output="s3://photos/raw", suffixes=[".tif"])], job_ctx)
    assert table.routes[0].suffixes == (".tif",)


def test_a_route_may_take_videos_by_their_suffixes(job_ctx):
    videos = [".MP4", ".mov", ".mkv", ".webm"]
    table = build_routing_table([route(task="cartoon", suffixes=videos)], job_ctx)
    assert table.routes[0].suffixes == (".mp4", ".mov", ".mkv", ".webm")
    names = ("a.mp4", "b.MOV", "c.mkv", "d.webm", "e.png", "f.avi")
    matched = [m.key for name in names for m in table.match("photos", f"in/{name}")]
    assert matched == ["a.mp4", "b.MOV", "c.mkv", "d.webm"]


def test_a_video_route_writing_where_it_reads_is_a_loop(job_ctx):
    """A video's result is an ``.mp4``: a route reading ``.mp4`` from its own output would trigger itself."""
    with pytest.raises(InvalidParameter, match="would trigger it again"):
        build_routing_table([route(input="s3://videos/in", output="s3://videos/in/out", suffixes=[".mp4"])], job_ctx)
    (r,) = build_routing_table(
        [route(input="s3://videos/in", output="s3://videos/in/out", suffixes=[".mov"])], job_ctx
    ).routes
    assert r.suffixes == (".mov",)


def test_params_from_metadata_override_route_defaults_through_the_same_models(job_ctx):
    (r,) = build_routing_table([route(params={"upscale": 2, "blend": 0.5})], job_ctx).routes
    assert (r.params.upscale, r.params.blend) == (2, 0.5)
    params = object_params(r, {"portrait-params": json.dumps({"blend": 0.25, "format": "png"})}, job_ctx)
    assert (params.upscale, params.blend, params.format) == (2, 0.25, "png")
    assert object_params(r, {}, job_ctx) is r.params


@pytest.mark.parametrize(
    ("raw", "message"),
    [("{not json", "is not valid JSON"), ("[1]", "must be a JSON object"), ('{"upscale": 3}', "upscale")],
)
def test_bad_params_in_metadata_are_the_callers_fault(job_ctx, raw, message):
    (r,) = build_routing_table([route()], job_ctx).routes
    with pytest.raises(InvalidParameter, match=message):
        object_params(r, {"portrait-params": raw}, job_ctx)


def test_unknown_route_fields_are_refused():
    with pytest.raises(Exception, match="extra"):
        BucketRoute.model_validate(route(colour="red"))


def test_store_secrets_stay_out_of_reprs(job_ctx):
    (r,) = build_routing_table(
        [route(store={"endpoint_url": "http://127.0.0.1:9000", "secret_key": "s3cr3t"})], job_ctx
    ).routes
    assert r.store.secret == "s3cr3t" and "s3cr3t" not in repr(r)
