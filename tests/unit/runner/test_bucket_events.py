"""Notification bodies → ObjectEvent: MinIO webhook, AWS records, SQS/SNS wrapping, test events, encoded keys."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from deployments.common.errors import InvalidParameter
from serve_app.runner.triggers.events import ObjectEvent, created_events, parse_notification
from tests.unit.runner.bucket_samples import minio_body, s3_record


def test_a_minio_webhook_body_becomes_one_decoded_event():
    (event,) = parse_notification(json.dumps(minio_body("photos", "in/my+photo%2Bone.jpg")).encode())
    assert event == ObjectEvent(
        bucket="photos",
        key="in/my photo+one.jpg",
        event_name="s3:ObjectCreated:Put",
        etag="abc123",
        size_bytes=1234,
        version_id="v1",
        event_time=datetime(2026, 11, 30, 10, 0, 0, 123000, tzinfo=UTC),
    )
    assert event.is_created


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ("in%2Fcat.jpg", "in/cat.jpg"),  # moto encodes "/" too
        ("a+b%20c.jpg", "a b c.jpg"),
        ("f%C3%BCr%20%E5%86%99%E7%9C%9F.png", "für 写真.png"),
        ("plain.jpg", "plain.jpg"),
    ],
)
def test_keys_are_url_decoded(raw, key):
    (event,) = parse_notification({"Records": [s3_record("b", raw)]})
    assert event.key == key


def test_aws_records_keep_every_record_and_quoted_etags_lose_their_quotes():
    body = {"Records": [s3_record("b", "one.jpg", eTag='"q1"'), s3_record("b", "two.jpg", name="ObjectRemoved:Delete")]}
    events = parse_notification(body)
    assert [(e.key, e.etag, e.is_created) for e in events] == [("one.jpg", "q1", True), ("two.jpg", "abc123", False)]
    assert [e.key for e in created_events(events)] == ["one.jpg"]


def test_an_sqs_body_wrapped_by_sns_is_unwrapped():
    inner = json.dumps({"Records": [s3_record("b", "x%2Fy.jpg")]})
    sns = json.dumps({"Type": "Notification", "MessageId": "m", "TopicArn": "arn:aws:sns:x", "Message": inner})
    (event,) = parse_notification(sns)
    assert (event.bucket, event.key) == ("b", "x/y.jpg")


def test_the_s3_test_event_carries_nothing():
    body = {"Service": "Amazon S3", "Event": "s3:TestEvent", "Time": "2026-11-30T10:00:00Z", "Bucket": "b"}
    assert parse_notification(json.dumps(body)) == []


def test_a_key_that_escapes_its_prefix_is_dropped_not_fatal(caplog):
    body = {"Records": [s3_record("b", "in%2F..%2F..%2Fetc%2Fpasswd"), s3_record("b", "ok.jpg")]}
    assert [e.key for e in parse_notification(body)] == ["ok.jpg"]
    assert "dropping Records[0]" in caplog.text


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"not json", "not valid JSON"),
        (b"[]", "must be a JSON object"),
        (b"{}", "needs a 'Records' list"),
        (b'{"Records": {}}', "'Records' must be a list"),
        (b'{"Records": [{"eventName": "x"}]}', "Records[0].s3 must be an object"),
        (b'{"Records": [{"eventName": "x", "s3": {"bucket": {"name": "b"}, "object": {}}}]}', "object.key"),
    ],
)
def test_bad_payloads_say_what_is_wrong(body, message):
    with pytest.raises(InvalidParameter, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_notification(body)


def test_events_are_frozen():
    (event,) = parse_notification(minio_body("b", "a.jpg"))
    with pytest.raises(AttributeError):
        event.key = "other"  # type: ignore[misc]
