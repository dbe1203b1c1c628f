"""A callback's signature is bound to its key and its receiver (issue #32, finding 9): key A naming key B's receiver as
its callback gets a POST there that B's receiver refuses, even when the app's one secret signs both keys' callbacks;
with a key's own secret the signature itself fails at B."""

from __future__ import annotations

import json
import time

from serve_app.runner.callbacks import SIGNATURE_HEADER, verify
from tests.unit.jobs_api.conftest import SECRET, make_jobs_app
from tests.unit.jobs_api.test_jobs_api import files_of
from tests.unit.runner.documented_receiver import documented_verifier

BOB_URL = "http://127.0.0.1:9/bob-hook"
ALICE, BOB = {"Authorization": "Bearer pk_a"}, {"Authorization": "Bearer pk_b"}
SHARED = {"pk_a": {"id": "alice"}, "pk_b": {"id": "bob"}}  # no secret of their own: the app's signs for both


def alice_calls_bob(tmp_path, backend, context, photo, keys) -> tuple[bytes, dict[str, str]]:
    """Alice submits a job whose callback_url is Bob's receiver; the POST that receiver gets."""
    app = make_jobs_app(tmp_path, backend, context, keys=keys)
    with app.client:
        form = {"task": "cartoon", "callback_url": BOB_URL}
        job_id = app.client.post("/v1/jobs", files=files_of(photo), data=form, headers=ALICE).json()["id"]
        app.wait(job_id, headers=ALICE)
    ((_, body, headers),) = app.receiver.calls
    return body, headers


def test_a_signature_for_key_as_job_does_not_verify_at_key_bs_receiver(tmp_path, local_backend, job_ctx, photo_jpeg):
    body, headers = alice_calls_bob(tmp_path, local_backend, job_ctx, photo_jpeg, SHARED)
    signature, sent = headers[SIGNATURE_HEADER], json.loads(body)
    assert (sent["key_id"], sent["callback_url"], headers["X-Portrait-Key-Id"]) == ("alice", BOB_URL, "alice")
    bobs_receiver = documented_verifier()
    assert not bobs_receiver(SECRET.encode(), signature, body, BOB_URL, "bob")  # signed for alice: refused
    assert bobs_receiver(SECRET.encode(), signature, body, BOB_URL, "alice")  # the signature itself is sound
    forged = body.replace(b'"key_id":"alice"', b'"key_id":"bob"')  # editing the key breaks the signature
    assert forged != body and not bobs_receiver(SECRET.encode(), signature, forged, BOB_URL, "bob")
    assert not verify(SECRET, signature, body, now_s=time.time(), url=BOB_URL, key_id="bob")
    assert not verify(SECRET, signature, body, now_s=time.time(), url="http://127.0.0.1:9/alice-hook", key_id="alice")


def test_a_key_with_its_own_secret_signs_with_it_so_another_receiver_cannot_even_verify(
    tmp_path, local_backend, job_ctx, photo_jpeg
):
    keys = {"pk_a": {"id": "alice", "callback_secret": "alice-secret"}, "pk_b": {"id": "bob"}}
    body, headers = alice_calls_bob(tmp_path, local_backend, job_ctx, photo_jpeg, keys)
    assert verify("alice-secret", headers[SIGNATURE_HEADER], body, now_s=time.time(), key_id="alice", url=BOB_URL)
    assert not verify(SECRET, headers[SIGNATURE_HEADER], body, now_s=time.time())  # Bob's (the app's) secret
