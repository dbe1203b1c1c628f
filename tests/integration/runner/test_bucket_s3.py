"""Bucket events end to end on real S3 servers, with the real engines in-process (no Ray).

SeaweedFS (no notifications): MinIO-shaped events delivered by hand — some twice, some never — then the reconciler;
a restart in the middle of a batch. moto: the AWS path, S3 → SQS notification → consumer → delete after the write.
"""

from __future__ import annotations

import asyncio
import json
import urllib.parse

import cv2
import numpy as np
import pytest

from deployments.common.image import encode_image
from serve_app.runner.outcomes import RetryPolicy, Status
from serve_app.runner.routing import build_routing_table
from serve_app.runner.triggers.events import parse_notification
from serve_app.runner.triggers.sqs import SqsConfig, SqsConsumer
from serve_app.runner.worker import BucketWorker, job_executor
from storage.base import open_store
from tests.unit.runner.bucket_samples import minio_body

pytestmark = pytest.mark.slow

RESULT_EXTENSIONS = (".jpg", ".png")


def photo(astronaut_rgb: np.ndarray, index: int) -> bytes:
    """Distinct small portraits: crops and sizes vary with ``index``."""
    side = 192 + 8 * index
    crop = astronaut_rgb[index * 4 : 400 + index * 4, 60 + index * 3 : 460 + index * 3]
    return encode_image(cv2.resize(crop, (side, side), interpolation=cv2.INTER_AREA), "jpeg", quality=85 + index % 10)


def routes_for(endpoint, bucket_in: str, bucket_out: str) -> list[dict]:
    store = {
        "endpoint_url": endpoint.endpoint_url,
        "region": endpoint.region,
        "access_key": endpoint.access_key,
        "secret_key": endpoint.secret_key,
        "max_attempts": 2,
    }
    return [
        {
            "name": "restore",
            "input": f"s3://{bucket_in}/in",
            "output": f"s3://{bucket_out}/restore",
            "task": "restore",
            "suffixes": [],
            "store": store,
        },
        {
            "name": "idphoto",
            "input": f"s3://{bucket_in}/id",
            "output": f"s3://{bucket_out}/id",
            "task": "idphoto",
            "params": {"spec": "us-passport"},
            "store": store,
        },
    ]


def worker_for(table, local_backend, job_ctx, **options) -> BucketWorker:
    retry = RetryPolicy(max_attempts=3, initial_backoff_s=0.05, max_backoff_s=0.2)
    return BucketWorker(table, job_executor(local_backend, job_ctx), job_ctx, retry=retry, **options)


def assert_exactly_one_record_each(table, sources: dict[str, list[str]], endpoint) -> dict[str, str]:
    """Every source has one result (image + .json) xor one error record; returns key → "result"/error code."""
    verdicts: dict[str, str] = {}
    for route in table.routes:
        out = open_store(route.output, route.store)
        written = {info.key for info in out.list()}
        expected: set[str] = set()
        for key in sources[route.name]:
            stem = key.rsplit(".", 1)[0]
            error = f"_errors/{key}.json"
            images = [stem + ext for ext in RESULT_EXTENSIONS if stem + ext in written]
            has_result = f"{stem}.json" in written
            assert (has_result and len(images) == 1) != (error in written), (key, images, has_result, error in written)
            if has_result:
                record = json.loads(out.get(f"{stem}.json", max_bytes=1 << 20).data)
                assert record["source"]["key"] == f"{route.input.prefix}/{key}"
                expected |= {f"{stem}.json", images[0]}
                verdicts[key] = "result"
            else:
                verdicts[key] = json.loads(out.get(error, max_bytes=1 << 20).data)["error"]["code"]
                expected.add(error)
        assert written == expected, written ^ expected
    return verdicts


def test_twenty_uploads_with_duplicate_and_missing_events_give_one_record_each(
    seaweed_s3, local_backend, job_ctx, astronaut_rgb, faceless_png
):
    s3 = seaweed_s3.client("s3")
    for bucket in ("photos", "results"):
        s3.create_bucket(Bucket=bucket)
    table = build_routing_table(routes_for(seaweed_s3, "photos", "results"), job_ctx)
    uploads = open_store("s3://photos", table.routes[0].store)
    sources: dict[str, list[str]] = {"restore": [], "idphoto": []}

    def upload(route: str, key: str, data: bytes, **metadata: str) -> None:
        prefix = "in" if route == "restore" else "id"
        uploads.put(f"{prefix}/{key}", data, content_type="application/octet-stream", metadata=metadata or None)
        sources[route].append(key)

    for index in range(14):
        upload("restore", f"batch/photo-{index:02d}.jpg", photo(astronaut_rgb, index))
    upload("restore", "with space/ä 写真.jpg", photo(astronaut_rgb, 14))
    upload("restore", "a+b c.jpg", photo(astronaut_rgb, 15), **{"portrait-params": '{"format": "png"}'})
    upload("restore", "readme.txt", b"drop photos here, not notes")
    upload("restore", "truncated.jpg", photo(astronaut_rgb, 16)[:2000])
    upload("idphoto", "faceless.png", faceless_png)
    upload("idphoto", "me.jpg", photo(astronaut_rgb, 3))
    assert sum(map(len, sources.values())) == 20

    # MinIO-shaped webhook bodies: every 4th object twice, the last three never.
    bodies = []
    for route, keys in sources.items():
        prefix = "in" if route == "restore" else "id"
        for index, key in enumerate(keys):
            if route == "restore" and index >= len(keys) - 3:
                continue
            body = minio_body("photos", urllib.parse.quote_plus(f"{prefix}/{key}", safe="/"))
            bodies += [body, body] if index % 4 == 0 else [body]

    async def deliver_then_reconcile():
        worker = worker_for(table, local_backend, job_ctx, max_concurrency=3)
        accepted = sum(worker.submit(parse_notification(json.dumps(body))) for body in bodies)
        await worker.drain()
        after_events = dict(worker.counts)
        outcomes = await worker.reconcile_all()
        return accepted, after_events, outcomes

    accepted, after_events, outcomes = asyncio.run(deliver_then_reconcile())
    assert accepted == len(bodies)
    # The duplicates are one queue entry each (same route, key and ETag): 17 objects, 17 attempts, none skipped.
    assert (sum(after_events.values()), after_events["skipped"]) == (17, 0)
    # The reconciler finds the three objects no event announced (a photo, the text file, the truncated JPEG).
    found = sorted((o.key, o.status.value) for o in outcomes if o.status is not Status.SKIPPED)
    assert found == [("a+b c.jpg", "done"), ("readme.txt", "failed"), ("truncated.jpg", "failed")]
    verdicts = assert_exactly_one_record_each(table, sources, seaweed_s3)
    assert verdicts.pop("readme.txt") == "unsupported_image"
    assert verdicts.pop("truncated.jpg") == "corrupt_image"
    assert verdicts.pop("faceless.png") == "no_face"
    assert set(verdicts.values()) == {"result"}
    results = open_store("s3://results/restore", table.routes[0].store)
    assert results.exists("a+b c.png") and results.exists("with space/ä 写真.jpg")


def test_a_restart_in_the_middle_of_a_batch_still_gives_one_result_each(
    seaweed_s3, local_backend, job_ctx, astronaut_rgb
):
    s3 = seaweed_s3.client("s3")
    for bucket in ("restart-in", "restart-out"):
        s3.create_bucket(Bucket=bucket)
    table = build_routing_table(routes_for(seaweed_s3, "restart-in", "restart-out")[:1], job_ctx)
    uploads = open_store("s3://restart-in/in", table.routes[0].store)
    keys = [f"p{index:02d}.jpg" for index in range(12)]
    for index, key in enumerate(keys):
        uploads.put(key, photo(astronaut_rgb, index), content_type="image/jpeg")
    bodies = [minio_body("restart-in", f"in/{key}") for key in keys]

    async def crash_midway() -> int:
        first = worker_for(table, local_backend, job_ctx, max_concurrency=2)
        for body in bodies:
            first.submit(parse_notification(body))
        for _ in range(3000):  # bounded: 30 s
            if first.counts["done"] >= 3:
                break
            await asyncio.sleep(0.01)
        first.cancel()  # the replica dies with objects in flight and queued
        await first.drain()
        return first.counts["done"]

    done_before = asyncio.run(crash_midway())
    assert 3 <= done_before < len(keys)

    async def fresh_start():
        second = worker_for(table, local_backend, job_ctx)
        return await second.reconcile_all()  # what BucketRunner does when it starts

    outcomes = asyncio.run(fresh_start())
    # Objects finished before the crash are skipped (a write already under way when the task was cancelled may
    # have finished too); the rest are done now. Either way: exactly one result each.
    statuses = [o.status for o in outcomes]
    assert len(statuses) == len(keys) and set(statuses) <= {Status.DONE, Status.SKIPPED}
    assert statuses.count(Status.SKIPPED) >= done_before and statuses.count(Status.DONE) >= 1
    assert_exactly_one_record_each(table, {"restore": keys}, seaweed_s3)


def test_the_sqs_path_deletes_a_message_only_after_its_record_is_written(
    moto_server, local_backend, job_ctx, astronaut_rgb
):
    s3, sqs = moto_server.client("s3"), moto_server.client("sqs")
    for bucket in ("aws-in", "aws-out"):
        s3.create_bucket(Bucket=bucket)
    queue_url = sqs.create_queue(QueueName="portrait-events")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    s3.put_bucket_notification_configuration(
        Bucket="aws-in",
        NotificationConfiguration={
            "QueueConfigurations": [
                {
                    "QueueArn": queue_arn,
                    "Events": ["s3:ObjectCreated:*"],
                    "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": "in/"}]}},
                }
            ]
        },
    )
    table = build_routing_table(routes_for(moto_server, "aws-in", "aws-out")[:1], job_ctx)
    keys = ["one.jpg", "two words.jpg", "ü.jpg", "notes.txt"]
    for index, key in enumerate(keys):
        data = b"just text" if key.endswith(".txt") else photo(astronaut_rgb, index)
        s3.put_object(Bucket="aws-in", Key=f"in/{key}", Body=data)
    s3.put_object(Bucket="aws-in", Key="elsewhere/skip.jpg", Body=b"filtered out by the notification prefix")

    config = SqsConfig(
        queue_url=queue_url,
        endpoint_url=moto_server.endpoint_url,
        region=moto_server.region,
        access_key="testing",
        secret_key="testing",
        wait_time_s=1,
        visibility_timeout_s=60,
    )
    worker = worker_for(table, local_backend, job_ctx)
    consumer = SqsConsumer(worker, config)

    async def consume() -> int:
        received = 0
        for _ in range(10):  # bounded: each receive waits at most 1 s
            got = await consumer.receive_once()
            received += got
            if got == 0 and received:
                break
        return received

    received = asyncio.run(consume())
    assert received >= len(keys) + 1  # the s3:TestEvent comes first
    assert consumer.deleted == received and consumer.kept == 0
    attributes = sqs.get_queue_attributes(
        QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    assert attributes == {"ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesNotVisible": "0"}
    verdicts = assert_exactly_one_record_each(table, {"restore": keys}, moto_server)
    assert verdicts == {
        "one.jpg": "result",
        "two words.jpg": "result",
        "ü.jpg": "result",
        "notes.txt": "unsupported_image",
    }
