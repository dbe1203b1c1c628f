"""``S3Store`` on real servers, held to the same contract as ``LocalStore``, plus what only a network can do wrong.

SeaweedFS is the real S3 server; moto also runs the contract because other modules rely on it for S3 events.
"""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from storage.base import ObjectStore, open_store
from storage.errors import BucketNotFound, ObjectNotFound, StoreUnavailable
from storage.local import LocalStore
from storage.s3 import S3Store
from tests.integration.conftest import S3Endpoint, free_ports
from tests.unit.storage.store_contract import ObjectStoreContract, race_to_create

pytestmark = pytest.mark.slow

FAST_FAILURE_S = 5.0


def _new_bucket(endpoint: S3Endpoint) -> str:
    bucket = f"test-{uuid.uuid4().hex[:12]}"
    endpoint.client().create_bucket(Bucket=bucket)
    return bucket


def _s3_store(endpoint: S3Endpoint, prefix: str = "") -> S3Store:
    return open_store(f"s3://{_new_bucket(endpoint)}/{prefix}", endpoint.store_settings())


STORE_FACTORIES: dict[str, Callable[[pytest.FixtureRequest, Path], ObjectStore]] = {
    "local": lambda request, tmp_path: LocalStore(tmp_path / "bucket"),
    "seaweed": lambda request, tmp_path: _s3_store(request.getfixturevalue("seaweed_s3")),
    "seaweed-prefixed": lambda request, tmp_path: _s3_store(request.getfixturevalue("seaweed_s3"), "tenant/raw"),
    "moto": lambda request, tmp_path: _s3_store(request.getfixturevalue("moto_server")),
}


@pytest.fixture(params=list(STORE_FACTORIES))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    return STORE_FACTORIES[request.param](request, tmp_path)


class TestEveryStore(ObjectStoreContract):
    pass


def test_prefixed_store_sees_only_its_prefix(seaweed_s3: S3Endpoint) -> None:
    bucket = _new_bucket(seaweed_s3)
    client = seaweed_s3.client()
    client.put_object(Bucket=bucket, Key="tenant/other.jpg", Body=b"x")
    client.put_object(Bucket=bucket, Key="tenantless.jpg", Body=b"x")
    store = S3Store(bucket, "tenant/raw/", **_connection(seaweed_s3))

    store.put("in/a.jpg", b"a", content_type="image/jpeg")

    assert client.get_object(Bucket=bucket, Key="tenant/raw/in/a.jpg")["Body"].read() == b"a"
    assert [info.key for info in store.list()] == ["in/a.jpg"]


def test_folder_markers_are_not_objects(seaweed_s3: S3Endpoint) -> None:
    store = _s3_store(seaweed_s3)
    seaweed_s3.client().put_object(Bucket=store.bucket, Key="in/", Body=b"")
    store.put("in/a.jpg", b"a", content_type="image/jpeg")

    assert [info.key for info in store.list()] == ["in/a.jpg"]


def test_missing_object_keeps_status_and_request_id(seaweed_s3: S3Endpoint) -> None:
    store = _s3_store(seaweed_s3)

    with pytest.raises(ObjectNotFound) as raised:
        store.get("missing.jpg", max_bytes=10)

    assert raised.value.status == 404
    assert raised.value.request_id


def test_missing_bucket_is_bucket_not_found(seaweed_s3: S3Endpoint) -> None:
    store = S3Store(f"absent-{uuid.uuid4().hex[:8]}", **_connection(seaweed_s3))

    with pytest.raises(BucketNotFound):
        store.get("a.jpg", max_bytes=10)


def test_refused_connection_is_store_unavailable_quickly() -> None:
    (port,) = free_ports(1)  # bound, then released: nothing listens, so connections are refused at once
    store = _impatient_store(port, max_attempts=2)

    started = time.monotonic()
    with pytest.raises(StoreUnavailable) as raised:
        store.head("a.jpg")

    assert time.monotonic() - started < FAST_FAILURE_S
    assert raised.value.retryable and raised.value.http_status == 503


def test_silent_server_is_store_unavailable_after_the_read_timeout() -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts connections (backlog), never answers
        port = silent.getsockname()[1]
        store = _impatient_store(port, max_attempts=1)

        started = time.monotonic()
        with pytest.raises(StoreUnavailable):
            store.get("a.jpg", max_bytes=10)

    assert time.monotonic() - started < FAST_FAILURE_S


def test_moto_server_also_serves_sqs(moto_server: S3Endpoint) -> None:
    sqs = moto_server.client("sqs")
    queue_url = sqs.create_queue(QueueName="events")["QueueUrl"]

    sqs.send_message(QueueUrl=queue_url, MessageBody="hello")

    assert sqs.receive_message(QueueUrl=queue_url)["Messages"][0]["Body"] == "hello"


def _connection(endpoint: S3Endpoint) -> dict:
    return {
        "endpoint_url": endpoint.endpoint_url,
        "region": endpoint.region,
        "access_key": endpoint.access_key,
        "secret_key": endpoint.secret_key,
    }


def _impatient_store(port: int, *, max_attempts: int) -> S3Store:
    return S3Store(
        "photos",
        endpoint_url=f"http://127.0.0.1:{port}",
        region="us-east-1",
        access_key="k",
        secret_key="s",
        max_attempts=max_attempts,
        connect_timeout_s=0.5,
        read_timeout_s=0.5,
    )


def test_racing_creates_of_one_key_have_exactly_one_winner_on_a_real_server(seaweed_s3: S3Endpoint) -> None:
    """``If-None-Match: *`` as SeaweedFS enforces it: eight writers (own clients, as replicas) create one key."""
    bucket = _new_bucket(seaweed_s3)
    stores = [S3Store(bucket, **_connection(seaweed_s3)) for _ in range(8)]
    for _round in range(5):
        stores[0].delete("idem/owner/key.json")

        won = race_to_create(stores, "idem/owner/key.json")

        assert len(won) == 1
        assert stores[0].get("idem/owner/key.json", max_bytes=100).data == won[0]
