"""Claims (``serve_app.runner.leases``) decided by the store's conditional writes: of many workers racing for one
object, exactly one wins, whether the object is free or its claim expired; a holder takes back its own claim."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from deployments.common.errors import InvalidParameter
from serve_app.runner.leases import Lease, Leases
from serve_app.runner.records import RECORD_CONTENT_TYPE, dump_record, read_record
from storage.base import open_store
from storage.keys import lease_name
from storage.local import LocalStore
from tests.unit.runner.bucket_fixtures import make_worker, race_to_claim

RACERS = 8
ROUNDS = 12
TTL_S = 600.0


def _write_lease(store: LocalStore, name: str, holder: str, expires_in_s: float) -> str:
    lease = Lease(holder=holder, expires_at=datetime.now(UTC) + timedelta(seconds=expires_in_s))
    return store.put(name, dump_record(lease), content_type=RECORD_CONTENT_TYPE).etag


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_exactly_one_of_many_racers_claims_a_free_object(tmp_path, round_):
    name = lease_name(f"photos/{round_}.jpg")
    winners = race_to_claim([LocalStore(tmp_path) for _ in range(RACERS)], name, TTL_S)
    assert len(winners) == 1
    assert read_record(LocalStore(tmp_path), name, Lease).holder == winners[0]


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_exactly_one_of_many_racers_takes_over_an_expired_claim(tmp_path, round_):
    name = lease_name(f"photos/{round_}.jpg")
    _write_lease(LocalStore(tmp_path), name, "a-worker-that-died", expires_in_s=-1.0)
    winners = race_to_claim([LocalStore(tmp_path) for _ in range(RACERS)], name, TTL_S)
    assert len(winners) == 1
    assert read_record(LocalStore(tmp_path), name, Lease).holder == winners[0]


def test_a_live_claim_of_another_holder_is_left_to_it(tmp_path):
    store, name = LocalStore(tmp_path), lease_name("a.jpg")
    etag = _write_lease(store, name, "bucket-runner", expires_in_s=TTL_S)
    assert Leases(ttl_s=TTL_S, holder="portrait-process/x").claim(store, name) is None
    assert store.head(name).etag == etag


def test_a_holder_renews_its_own_live_claim(tmp_path):
    """A runner restarted after a crash claims as the same holder: it takes its claims back at once, for a new TTL."""
    store, name = LocalStore(tmp_path), lease_name("a.jpg")
    old_etag = _write_lease(store, name, "bucket-runner", expires_in_s=5.0)
    before = datetime.now(UTC)
    etag = Leases(ttl_s=TTL_S, holder="bucket-runner").claim(store, name)
    assert etag is not None and etag != old_etag and store.head(name).etag == etag
    renewed = read_record(store, name, Lease)
    assert renewed.holder == "bucket-runner"
    assert renewed.expires_at >= before + timedelta(seconds=TTL_S)


def test_a_released_claim_is_gone_and_free_again(tmp_path):
    store, name = LocalStore(tmp_path), lease_name("a.jpg")
    first, second = Leases(ttl_s=TTL_S, holder="one"), Leases(ttl_s=TTL_S, holder="two")
    etag = first.claim(store, name)
    first.release(store, name, etag)
    assert not store.exists(name)
    assert second.claim(store, name) is not None


def test_releasing_a_claim_taken_over_leaves_the_new_holders_claim(tmp_path):
    """A job that overran the TTL: its claim was taken over, and its release must not free the new holder's."""
    store, name = LocalStore(tmp_path), lease_name("a.jpg")
    slow = Leases(ttl_s=-1.0, holder="slow")  # its claim is expired as soon as written
    etag = slow.claim(store, name)
    taker_etag = Leases(ttl_s=TTL_S, holder="taker").claim(store, name)
    assert taker_etag is not None
    slow.release(store, name, etag)
    assert store.head(name).etag == taker_etag
    assert read_record(store, name, Lease).holder == "taker"


def test_an_unreadable_claim_is_taken_over(tmp_path):
    store, name = LocalStore(tmp_path), lease_name("a.jpg")
    store.put(name, b"not json", content_type=RECORD_CONTENT_TYPE)
    assert Leases(ttl_s=TTL_S, holder="one").claim(store, name) is not None
    assert read_record(store, name, Lease).holder == "one"


class _IgnoresConditions:
    """A real store whose ``put`` writes whatever its conditions say, as an S3 server ignoring ``If-None-Match``."""

    def __init__(self, store) -> None:
        self._store = store

    def __getattr__(self, name):
        return getattr(self._store, name)

    def put(self, key, data, *, content_type, metadata=None, if_absent=False, if_match=None):
        return self._store.put(key, data, content_type=content_type, metadata=metadata)


def test_a_worker_refuses_an_output_store_that_ignores_conditional_writes(tmp_path, local_backend, job_ctx):
    def opener(location, settings=None):
        store = open_store(location, settings)
        return _IgnoresConditions(store) if location.bucket.endswith("/out") else store

    worker = make_worker(tmp_path, local_backend, job_ctx, store_opener=opener)
    with pytest.raises(InvalidParameter, match="route 'r': the output store .* ignores conditional writes"):
        asyncio.run(worker.require_claims())
    assert list(LocalStore(tmp_path / "out").list()) == []


def test_a_worker_accepts_a_folder_output_and_leaves_no_probe_behind(tmp_path, local_backend, job_ctx):
    worker = make_worker(tmp_path, local_backend, job_ctx)
    asyncio.run(worker.require_claims())
    assert list(LocalStore(tmp_path / "out").list()) == []
