"""One job per idempotency key, however close together the submits come: the key is claimed by a conditional write in
the jobs store, so two replicas (each with its own store object, no shared lock) racing with one key make one job,
and every submit answers its id. Also: a key reused for other content, a claim left by a dead submit, an expired job's
key, a refused submit's key."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from deployments.common.errors import InvalidParameter, Overloaded
from serve_app.jobs import JOBS
from serve_app.jobs_api import JobsService
from serve_app.jobs_api import service as service_module
from serve_app.jobs_api.service import IdempotencyKeyReused, Submission
from serve_app.runner.jobs_config import JobsConfig
from serve_app.runner.jobs_layout import JobRef, idempotency_key
from serve_app.runner.jobs_records import IdempotencyClaim
from serve_app.runner.jobs_store import JobStore
from serve_app.upload_spool import SpooledBody
from storage.errors import StoreUnavailable
from storage.local import LocalStore
from tests.unit.jobs_api.test_jobs_api import files_of

ROUNDS = 25
T0 = datetime(2026, 12, 2, 4, 0, tzinfo=UTC)


@dataclass
class RecordingQueue:
    """Takes every job (or refuses the first ``refusals``), and remembers what it was given."""

    refusals: int = 0
    queued: list[JobRef] = field(default_factory=list)

    async def enqueue(self, task: str, ref: JobRef) -> None:
        if self.refusals > 0:
            self.refusals -= 1
            raise Overloaded("the jobs queue is full", details={"retry_after_s": 5})
        self.queued.append(ref)


@dataclass
class Clock:
    now: datetime = T0

    def __call__(self) -> datetime:
        return self.now


def replica(tmp_path: Path, queue: RecordingQueue, clock: Clock | None = None) -> JobsService:
    """A JobsService as one ingress replica holds it: its own store object over the shared folder."""
    config = JobsConfig(store=str(tmp_path / "jobs"), retention_s=3600)
    store = JobStore(config.location(None), config.s3, JOBS)
    store.prepare()
    return JobsService(config, store, queue, clock=clock)


def submission(key: str, photo: bytes = b"photo bytes", **fields: str) -> Submission:
    return Submission("cartoon", SpooledBody.of(photo), dict(fields), idempotency_key=key)


def test_racing_submits_with_one_key_on_two_replicas_make_one_job(tmp_path):
    queue = RecordingQueue()
    replicas = [replica(tmp_path, queue), replica(tmp_path, queue)]

    async def race(key: str) -> list[tuple[str, bool]]:
        submits = [replicas[index % 2].submit("alice", submission(key)) for index in range(4)]
        return [(view.record.id, created) for view, created in await asyncio.gather(*submits)]

    for round_ in range(ROUNDS):
        answers = asyncio.run(race(f"order-{round_}"))
        ids = {job_id for job_id, _ in answers}
        assert len(ids) == 1, f"round {round_}: {answers}"
        assert sorted(created for _, created in answers) == [False, False, False, True]
    jobs = sorted(replicas[0].store.refs("alice"), key=lambda ref: ref.id)
    assert len(jobs) == ROUNDS
    assert sorted(queue.queued, key=lambda ref: ref.id) == jobs


def test_racing_http_submits_with_one_key_answer_202_and_200_with_one_id(jobs_app, photo_jpeg):
    """Two ``POST /v1/jobs`` at once from two threads, a few rounds, through the real app and runner."""
    rounds, answers = 3, []
    for round_ in range(rounds):
        start = threading.Barrier(2)
        form = {"task": "cartoon", "idempotency_key": f"order-{round_}"}
        replies: list = [None, None]

        def post(index: int, form: dict = form, start: threading.Barrier = start, replies: list = replies) -> None:
            start.wait()
            replies[index] = jobs_app.client.post("/v1/jobs", files=files_of(photo_jpeg), data=form)

        threads = [threading.Thread(target=post, args=(index,)) for index in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(reply.status_code for reply in replies) == [200, 202], [reply.text for reply in replies]
        (first, second) = ({**reply.json(), "status": "seen"} for reply in replies)  # queued, or running by now
        assert first == second
        answers.append(replies[0].json()["id"])
    for job_id in answers:
        assert jobs_app.wait(job_id)["status"] == "succeeded"
    assert sorted(ref.id for ref in jobs_app.store.refs()) == sorted(answers)


def test_one_key_for_other_content_is_422_idempotency_key_reused(jobs_app, photo_jpeg):
    client = jobs_app.client
    form = {"task": "cartoon", "idempotency_key": "order-17"}
    first = client.post("/v1/jobs", files=files_of(photo_jpeg), data=form)
    other = client.post("/v1/jobs", files=files_of(photo_jpeg), data={**form, "style": "sketch"})
    assert (first.status_code, other.status_code) == (202, 422)
    assert other.json() == {
        "error": {
            "code": "idempotency_key_reused",
            "message": "this idempotency_key was used for another submission (task, options, callback or input)",
            "details": {"id": first.json()["id"]},
        }
    }
    jobs_app.wait(first.json()["id"])
    assert [ref.id for ref in jobs_app.store.refs()] == [first.json()["id"]]


def test_a_submit_waits_for_a_live_claim_then_answers_409_with_retry_after(jobs_app, photo_jpeg, monkeypatch):
    """The claiming submit has not accepted its job yet (it is slow, or died less than CLAIM_TTL_S ago)."""
    monkeypatch.setattr(service_module, "CLAIM_WAIT_S", 0.3)
    form = {"task": "cartoon", "idempotency_key": "order-17"}
    digest = service_module.hashlib.sha256(b"order-17").hexdigest()
    claim = IdempotencyClaim(
        id=f"{int((datetime.now(UTC) + timedelta(hours=1)).timestamp()):x}-{'0' * 24}",
        fingerprint=None,
        accepted=False,
        claimed_at=datetime.now(UTC),
    )
    jobs_app.store.write_claim("anonymous", digest, claim, replacing=None)

    reply = jobs_app.client.post("/v1/jobs", files=files_of(photo_jpeg), data=form)

    assert (reply.status_code, reply.headers["retry-after"]) == (409, "1")
    assert reply.json()["error"]["code"] == "idempotency_in_progress"
    assert list(jobs_app.store.refs()) == []


def test_a_claim_left_unaccepted_past_its_ttl_is_taken_over_and_its_job_purged(tmp_path):
    queue, clock = RecordingQueue(), Clock()
    service = replica(tmp_path, queue, clock)
    digest = service_module.hashlib.sha256(b"order-17").hexdigest()
    # A submit (another replica: its own store object over the folder) claimed the key, stored its job, then died.
    dead = replica(tmp_path, RecordingQueue(), clock)
    orphan = dead._new_record("alice", submission("order-17"), digest)
    dead.store.create(orphan, b"photo bytes", {})
    dead.store.write_claim(
        "alice", digest, IdempotencyClaim(id=orphan.id, accepted=False, claimed_at=clock.now), replacing=None
    )
    clock.now += timedelta(seconds=service_module.CLAIM_TTL_S + 1)

    view, created = asyncio.run(service.submit("alice", submission("order-17")))

    assert created and view.record.id != orphan.id
    assert queue.queued == [JobRef("alice", view.record.id)]
    assert [ref.id for ref in service.store.refs()] == [view.record.id]
    assert list(service.store.root.list(f"in/cartoon/alice/{orphan.id}")) == []
    claim, _ = service.store.claim("alice", digest)
    assert (claim.id, claim.accepted) == (view.record.id, True)


def test_an_expired_jobs_key_names_a_new_job(tmp_path):
    queue, clock = RecordingQueue(), Clock()
    service = replica(tmp_path, queue, clock)
    first, _ = asyncio.run(service.submit("alice", submission("order-17")))
    clock.now += timedelta(seconds=3601)

    second, created = asyncio.run(service.submit("alice", submission("order-17", style="sketch")))

    assert created and second.record.id != first.record.id
    assert service.store.claim("alice", second.record.idempotency)[0].id == second.record.id
    # The sweep of the expired job leaves the key's new claim alone.
    service.store.purge(JobRef("alice", first.record.id))
    assert service.store.root.exists(idempotency_key("alice", second.record.idempotency))


def test_a_refused_submit_frees_its_key(tmp_path):
    queue = RecordingQueue(refusals=1)
    service = replica(tmp_path, queue)

    with pytest.raises(Overloaded):
        asyncio.run(service.submit("alice", submission("order-17")))
    view, created = asyncio.run(service.submit("alice", submission("order-17")))

    assert created and queue.queued == [JobRef("alice", view.record.id)]
    assert [ref.id for ref in service.store.refs()] == [view.record.id]


def test_a_submit_the_store_failed_frees_its_key(tmp_path, monkeypatch):
    queue = RecordingQueue()
    service = replica(tmp_path, queue)
    create = service.store.create

    def fails_once(record, data, fields):
        monkeypatch.setattr(service.store, "create", create)
        create(record, data, fields)  # the record landed, then the store went away before the input did
        raise StoreUnavailable("the store did not answer", key=f"in/cartoon/alice/{record.id}")

    monkeypatch.setattr(service.store, "create", fails_once)
    with pytest.raises(StoreUnavailable):
        asyncio.run(service.submit("alice", submission("order-17")))
    assert list(service.store.root.list()) == []
    view, created = asyncio.run(service.submit("alice", submission("order-17")))

    assert created and queue.queued == [JobRef("alice", view.record.id)]


def test_the_same_content_is_the_same_job_and_other_content_is_refused(tmp_path):
    service = replica(tmp_path, RecordingQueue())
    first, _ = asyncio.run(service.submit("alice", submission("order-17", style="anime")))
    again, created = asyncio.run(service.submit("alice", submission("order-17", style="anime")))
    assert (again.record.id, created) == (first.record.id, False)
    for other in (submission("order-17", style="sketch"), submission("order-17", b"another photo", style="anime")):
        with pytest.raises(IdempotencyKeyReused):
            asyncio.run(service.submit("alice", other))
    other_owner, created = asyncio.run(service.submit("bob", submission("order-17", style="sketch")))
    assert created and other_owner.record.id != first.record.id


class IgnoresConditions(LocalStore):
    """An S3 server of old, which takes ``If-None-Match`` and overwrites anyway."""

    def put(self, key, data, *, content_type, metadata=None, if_absent=False, if_match=None):
        return super().put(key, data, content_type=content_type, metadata=metadata)


def test_a_store_that_ignores_conditional_writes_is_refused_at_start(tmp_path):
    config = JobsConfig(store=str(tmp_path / "jobs"))
    store = JobStore(config.location(None), config.s3, JOBS)
    store.root = IgnoresConditions(tmp_path / "jobs")

    with pytest.raises(InvalidParameter, match="ignores conditional writes"):
        store.prepare()
    assert list(store.root.list()) == []
