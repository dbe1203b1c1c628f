"""``portrait buckets setup`` against a real S3 server (moto): buckets made once, one notification rule per route
and suffix on each input bucket, and nothing for local-folder routes."""

from __future__ import annotations

import pytest

from serve_app.runner.routing import build_routing_table
from serve_app.runner.triggers.minio_setup import minio_client, notification_rules, setup_buckets

pytestmark = pytest.mark.slow


def routes_on(endpoint, tmp_path, job_ctx):
    store = {
        "endpoint_url": endpoint.endpoint_url,
        "access_key": endpoint.access_key,
        "secret_key": endpoint.secret_key,
    }
    return build_routing_table(
        [
            {
                "name": "restore",
                "input": "s3://photos/restore",
                "output": "s3://results/restore",
                "task": "restore",
                "suffixes": [".jpg", ".png"],
                "store": store,
            },
            {
                "name": "idphoto",
                "input": "s3://photos/idphoto",
                "output": "s3://results/idphoto",
                "task": "idphoto",
                "suffixes": [".jpg"],
                "store": store,
            },
            {"name": "folder", "input": str(tmp_path / "in"), "output": str(tmp_path / "out"), "task": "cartoon"},
        ],
        job_ctx,
    ).routes


def test_buckets_and_rules_are_made_once_and_read_back(moto_server, tmp_path, job_ctx):
    routes = routes_on(moto_server, tmp_path, job_ctx)
    queue = moto_server.client("sqs").create_queue(QueueName="portrait-events")["QueueUrl"]
    arn = moto_server.client("sqs").get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    first = setup_buckets(routes, webhook=None, arn=arn)
    assert first == [
        "bucket photos: created",
        "bucket results: created",
        f"events photos: 3 rules -> {arn}",
    ]
    assert setup_buckets(routes, webhook=None, arn=arn)[:2] == ["bucket photos: exists", "bucket results: exists"]

    read_back = minio_client(routes[0].store).get_bucket_notification("photos")
    rules = {
        (rule.config_id, rule.prefix_filter_rule.value, rule.suffix_filter_rule.value, tuple(rule.events))
        for rule in read_back.queue_config_list
    }
    assert rules == {
        ("portrait-restore.jpg", "restore/", ".jpg", ("s3:ObjectCreated:*",)),
        ("portrait-restore.png", "restore/", ".png", ("s3:ObjectCreated:*",)),
        ("portrait-idphoto.jpg", "idphoto/", ".jpg", ("s3:ObjectCreated:*",)),
    }


def test_local_folder_routes_need_nothing(tmp_path, job_ctx, moto_server):
    (folder,) = [route for route in routes_on(moto_server, tmp_path, job_ctx) if route.name == "folder"]
    assert notification_rules([folder], "arn:minio:sqs::portrait:webhook") == {}
    assert setup_buckets([folder], webhook=None, arn="arn:minio:sqs::portrait:webhook") == []


def test_the_cli_prepares_the_routes_of_a_serve_yaml(moto_server, tmp_path, capsys):
    import yaml

    from serve_app.cli import main

    store = {"endpoint_url": moto_server.endpoint_url, "access_key": "k", "secret_key": "s"}
    route = {"name": "cli", "input": "s3://cli-in/new", "output": "s3://cli-out/new", "task": "restore", "store": store}
    config = tmp_path / "serve.yaml"
    config.write_text(
        yaml.safe_dump(
            {"applications": [{"deployments": [{"name": "BucketRunner", "user_config": {"routes": [route]}}]}]}
        )
    )
    sqs = moto_server.client("sqs")
    arn = sqs.get_queue_attributes(
        QueueUrl=sqs.create_queue(QueueName="cli-events")["QueueUrl"], AttributeNames=["QueueArn"]
    )["Attributes"]["QueueArn"]
    assert main(["buckets", "setup", str(config), "--arn", arn]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "bucket cli-in: created",
        "bucket cli-out: created",
        f"events cli-in: 4 rules -> {arn}",
    ]
