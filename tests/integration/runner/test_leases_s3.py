"""Claims on real S3 servers: of eight workers (clients of their own, as processes would hold them) racing for one
object, exactly one wins, whether it is free (``If-None-Match: *``) or its claim expired (``If-Match``)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from serve_app.runner.leases import Lease, Leases, require_conditional_writes
from serve_app.runner.records import RECORD_CONTENT_TYPE, dump_record, read_record
from storage.keys import lease_name
from storage.s3 import S3Store
from tests.integration.conftest import S3Endpoint
from tests.unit.runner.bucket_fixtures import race_to_claim

RACERS = 8
ROUNDS = 4


@pytest.fixture(params=["seaweed_s3", "moto_server"])
def stores(request: pytest.FixtureRequest) -> list[S3Store]:
    endpoint: S3Endpoint = request.getfixturevalue(request.param)
    bucket = f"test-{uuid.uuid4().hex[:12]}"
    endpoint.client().create_bucket(Bucket=bucket)
    connection = {
        "endpoint_url": endpoint.endpoint_url,
        "region": endpoint.region,
        "access_key": endpoint.access_key,
        "secret_key": endpoint.secret_key,
    }
    return [S3Store(bucket, "out", **connection) for _ in range(RACERS)]


def test_exactly_one_racer_claims_a_free_object_each_round(stores: list[S3Store]) -> None:
    for round_ in range(ROUNDS):
        name = lease_name(f"photos/{round_}.jpg")
        winners = race_to_claim(stores, name)
        assert len(winners) == 1
        assert read_record(stores[0], name, Lease).holder == winners[0]


def test_exactly_one_racer_takes_over_an_expired_claim_each_round(stores: list[S3Store]) -> None:
    for round_ in range(ROUNDS):
        name = lease_name(f"photos/{round_}.jpg")
        expired = Lease(holder="a-worker-that-died", expires_at=datetime.now(UTC) - timedelta(seconds=1))
        stores[0].put(name, dump_record(expired), content_type=RECORD_CONTENT_TYPE)
        winners = race_to_claim(stores, name)
        assert len(winners) == 1
        assert read_record(stores[0], name, Lease).holder == winners[0]


def test_a_claim_released_is_gone_and_a_claim_renewed_is_the_holders(stores: list[S3Store]) -> None:
    """The ETag a claim returns is the one ``head`` reports, so a release deletes it (and does not linger)."""
    name = lease_name("photos/a.jpg")
    runner, restarted = Leases(ttl_s=600.0, holder="bucket-runner"), Leases(ttl_s=600.0, holder="bucket-runner")
    first = runner.claim(stores[0], name)
    renewed = restarted.claim(stores[1], name)
    assert first is not None and renewed is not None and renewed != first
    runner.release(stores[0], name, first)  # the older claim's release leaves the renewed one
    assert stores[0].head(name).etag == renewed
    restarted.release(stores[1], name, renewed)
    assert not stores[0].exists(name)


def test_the_start_up_check_passes_and_leaves_no_probe(stores: list[S3Store]) -> None:
    require_conditional_writes(stores[0], "r")
    assert list(stores[0].list()) == []
