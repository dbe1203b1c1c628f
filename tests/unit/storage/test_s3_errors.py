"""``S3Store`` error mapping and byte cap, with botocore's ``Stubber`` standing in for the network."""

from __future__ import annotations

import io
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import botocore.exceptions
import pytest
from botocore.response import StreamingBody
from botocore.stub import ANY, Stubber

from storage.errors import (
    AccessDenied,
    BucketNotFound,
    KeyTooLong,
    ObjectArchived,
    ObjectNotFound,
    ObjectStoreError,
    ObjectTooLarge,
    StoreUnavailable,
)
from storage.s3 import S3Store


@pytest.fixture(scope="module")
def store() -> S3Store:
    """One client for the module: building a boto3 client costs about half a second."""
    return S3Store(
        "photos", "in", endpoint_url="http://127.0.0.1:9", region="us-east-1", access_key="k", secret_key="s"
    )


@pytest.fixture
def stub(store: S3Store) -> Iterator[Stubber]:
    with Stubber(store._client) as stubber:
        yield stubber
        stubber.assert_no_pending_responses()


@pytest.mark.parametrize(
    ("s3_code", "status", "expected"),
    [
        ("NoSuchKey", 404, ObjectNotFound),
        ("404", 404, ObjectNotFound),  # HEAD replies carry no body, so the code is the status
        ("NoSuchBucket", 404, BucketNotFound),
        ("AccessDenied", 403, AccessDenied),
        ("InvalidAccessKeyId", 403, AccessDenied),
        ("SlowDown", 503, StoreUnavailable),
        ("Throttling", 400, StoreUnavailable),
        ("KeyTooLongError", 400, KeyTooLong),
        ("InvalidObjectState", 403, ObjectArchived),
        ("SomethingNew", 500, StoreUnavailable),  # unknown code: the status decides
        ("SomethingNew", 400, ObjectStoreError),
    ],
)
def test_client_errors_map_to_one_exception_each(
    store: S3Store, stub: Stubber, s3_code: str, status: int, expected: type[ObjectStoreError]
) -> None:
    stub.add_client_error(
        "get_object",
        service_error_code=s3_code,
        service_message="told by S3",
        http_status_code=status,
        response_meta={"RequestId": "REQ123"},
        expected_params={"Bucket": "photos", "Key": "in/a b.jpg"},
    )

    with pytest.raises(expected) as raised:
        store.get("a b.jpg", max_bytes=10)

    error = raised.value
    assert type(error) is expected
    assert (error.key, error.bucket, error.status, error.request_id, error.s3_code) == (
        "a b.jpg",
        "photos",
        status,
        "REQ123",
        s3_code,
    )
    assert error.details["request_id"] == "REQ123"
    assert isinstance(error.__cause__, botocore.exceptions.ClientError)
    assert error.retryable is (expected is StoreUnavailable)


@pytest.mark.parametrize(
    ("error", "retryable"),
    [
        (AccessDenied("denied"), False),
        (BucketNotFound("no bucket"), False),
        (KeyTooLong("too long"), False),
        (ObjectArchived("in Glacier"), False),
        (StoreUnavailable("down", status=400), True),  # throttled: waiting helps whatever the status
        (ObjectStoreError("unmapped", status=500), True),
        (ObjectStoreError("unmapped", status=429), True),
        (ObjectStoreError("unmapped"), True),  # no reply at all, or a local I/O error
        (ObjectStoreError("unmapped", status=400), False),
    ],
)
def test_store_refusals_are_permanent_and_blips_are_retryable(error: ObjectStoreError, retryable: bool) -> None:
    assert error.retryable is retryable


def test_size_is_checked_before_the_body_is_read_past_its_first_bytes(store: S3Store, stub: Stubber) -> None:
    class HeadOnlyBody(io.BytesIO):
        def read(self, size: int | None = -1) -> bytes:
            if size is None or not 0 <= size <= ObjectTooLarge.HEAD_BYTES:
                raise AssertionError("body read past its head although Content-Length was over the cap")
            return super().read(size)

    body = StreamingBody(HeadOnlyBody(b"\x1a\x45\xdf\xa3" + b"w" * 96), 100)
    stub.add_response("get_object", _get_reply(body, content_length=100))

    with pytest.raises(ObjectTooLarge) as refused:
        store.get("big.webm", max_bytes=99)

    assert (refused.value.size_bytes, refused.value.head) == (100, b"\x1a\x45\xdf\xa3" + b"w" * 60)


def test_a_body_longer_than_announced_is_cut_at_the_cap(store: S3Store, stub: Stubber) -> None:
    body = StreamingBody(io.BytesIO(b"x" * 5000), 5000)
    stub.add_response("get_object", _get_reply(body, content_length=10))

    with pytest.raises(ObjectTooLarge) as refused:
        store.get("liar.jpg", max_bytes=100)

    assert refused.value.size_bytes == 101


def _get_reply(body: StreamingBody, *, content_length: int) -> dict:
    return {
        "Body": body,
        "ContentLength": content_length,
        "ETag": '"0123"',
        "LastModified": datetime(2026, 1, 1, tzinfo=UTC),
        "ContentType": "image/jpeg",
    }


def test_put_file_hands_botocore_the_open_file_not_its_bytes(store: S3Store, stub: Stubber, tmp_path: Path) -> None:
    source = tmp_path / "result.mp4"
    source.write_bytes(b"mp4 bytes")
    bodies: list = []
    store._client.meta.events.register(
        "before-parameter-build.s3.PutObject", lambda params, **_: bodies.append(params["Body"])
    )
    stub.add_response(
        "put_object",
        {"ETag": '"abc"', "ResponseMetadata": {"HTTPHeaders": {"date": "Wed, 02 Dec 2026 04:00:00 GMT"}}},
        expected_params={
            "Bucket": "photos",
            "Key": "in/out/clip.mp4",
            "Body": ANY,
            "ContentType": "video/mp4",
            "Metadata": {"job": "restore"},
        },
    )

    written = store.put_file("out/clip.mp4", source, content_type="video/mp4", metadata={"job": "restore"})

    (body,) = bodies
    assert not isinstance(body, bytes | bytearray) and body.name == str(source)  # streamed by botocore from the file
    assert (written.key, written.size_bytes, written.etag) == ("out/clip.mp4", len(b"mp4 bytes"), "abc")
    assert written.last_modified == datetime(2026, 12, 2, 4, 0, tzinfo=UTC)
