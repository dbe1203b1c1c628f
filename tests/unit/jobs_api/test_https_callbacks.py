"""Callbacks over HTTPS to a real local server: the signed body and headers arrive as docs/buckets-and-jobs.md says;
a certificate the service does not trust, or one for another name, gets nothing unless ``args.jobs.callback_ca_file``
names its CA; loopback receivers stay refused unless listed in ``callback_hosts``, CA file or not."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from deployments.common.errors import InvalidParameter
from serve_app.auth import KeyRing
from serve_app.jobs import JOBS
from serve_app.runner.callbacks import SIGNATURE_HEADER, callback_poster, deliver, verify
from serve_app.runner.jobs_config import JobsConfig
from serve_app.runner.jobs_layout import JobRef
from serve_app.runner.jobs_runner import JobsRunner
from serve_app.runner.jobs_store import JobStore
from tests.unit.jobs_api.conftest import SECRET, make_jobs_app
from tests.unit.jobs_api.test_jobs_api import files_of
from tests.unit.jobs_api.tls_receiver import HttpsReceiver, make_pki
from tests.unit.runner.documented_receiver import documented_verifier

LOOPBACK = ("127.0.0.1",)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A private CA; ``local`` is a certificate for 127.0.0.1 and localhost, ``elsewhere`` one for another name."""
    return make_pki(
        tmp_path_factory.mktemp("pki"),
        {"local": ["IP:127.0.0.1", "DNS:localhost"], "elsewhere": ["DNS:receiver.example"]},
    )


def deliver_once(url: str, config: JobsConfig):
    """One attempt (the deadline is now), through the poster the runner uses."""
    return asyncio.run(
        deliver(
            url, b'{"id":"x"}', "k", config=config, deadline_s=time.time(), timeout_s=10, post=callback_poster(config)
        )
    )


def test_a_job_calls_back_an_https_receiver_whose_ca_is_configured(tmp_path, local_backend, job_ctx, photo_jpeg, pki):
    ca, certs = pki
    with HttpsReceiver(certs["local"]) as receiver:
        app = make_jobs_app(tmp_path, local_backend, job_ctx, send_callbacks=True, callback_ca_file=str(ca))
        with app.client:
            url = receiver.url("/hook?order=17")
            form = {"task": "cartoon", "callback_url": url}
            job_id = app.client.post("/v1/jobs", files=files_of(photo_jpeg), data=form).json()["id"]
            done = app.wait(job_id)
        (call,) = receiver.requests
    assert call.path == "/hook?order=17"
    assert (call.headers["content-type"], call.headers["host"]) == ("application/json", f"127.0.0.1:{receiver.port}")
    assert call.headers["content-length"] == str(len(call.body))
    signature = call.headers[SIGNATURE_HEADER.lower()]
    assert verify(SECRET, signature, call.body, now_s=time.time())
    assert call.headers["x-portrait-key-id"] == "anonymous"
    assert documented_verifier()(SECRET.encode(), signature, call.body, url, "anonymous")
    assert not documented_verifier()(b"another-secret", signature, call.body, url, "anonymous")
    sent = json.loads(call.body)
    assert sent == {**done, "updated_at": sent["updated_at"], "key_id": "anonymous", "callback_url": url}
    state = app.store.view(JobRef("anonymous", job_id)).state
    assert (state.callback.attempts, state.callback.last_error) == (1, None)
    assert state.callback.delivered_at is not None


def test_an_https_receiver_with_an_untrusted_certificate_gets_nothing(pki):
    _, certs = pki
    with HttpsReceiver(certs["local"]) as receiver:
        delivery = deliver_once(receiver.url("/hook"), JobsConfig(callback_hosts=LOOPBACK))
    assert (delivery.delivered, delivery.attempts) == (False, 1)
    assert "CERTIFICATE_VERIFY_FAILED" in delivery.last_error
    assert "unable to get local issuer certificate" in delivery.last_error
    assert receiver.requests == []


def test_a_trusted_ca_does_not_excuse_a_certificate_for_another_name(pki):
    ca, certs = pki
    with HttpsReceiver(certs["elsewhere"]) as receiver:
        delivery = deliver_once(receiver.url("/hook"), JobsConfig(callback_hosts=LOOPBACK, callback_ca_file=str(ca)))
    assert (delivery.delivered, delivery.attempts) == (False, 1)
    assert "CERTIFICATE_VERIFY_FAILED" in delivery.last_error and "mismatch" in delivery.last_error
    assert receiver.requests == []


def test_the_certificate_is_checked_for_the_urls_host_name_while_the_checked_address_is_dialled(pki):
    """``https://localhost``: connected to the address it resolved to, verified (SNI and name) as ``localhost``."""
    ca, certs = pki
    config = JobsConfig(callback_hosts=("localhost", "127.0.0.1", "::1"), callback_ca_file=str(ca))
    with HttpsReceiver(certs["local"]) as receiver:
        delivery = deliver_once(receiver.url("/hook", host="localhost"), config)
    if delivery.last_error is not None and "Connection refused" in delivery.last_error:
        pytest.skip("localhost resolves to an address the receiver (127.0.0.1) does not listen on")
    assert (delivery.delivered, delivery.last_error) == (True, None)
    (call,) = receiver.requests
    assert call.headers["host"] == f"localhost:{receiver.port}"


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::1]", "10.1.2.3", "169.254.169.254"])
def test_https_callbacks_to_private_addresses_are_refused_at_submit_even_with_a_ca_file(
    tmp_path, local_backend, job_ctx, photo_jpeg, pki, host
):
    ca, _ = pki
    app = make_jobs_app(tmp_path, local_backend, job_ctx, callback_hosts=[], callback_ca_file=str(ca))
    with app.client:
        form = {"task": "cartoon", "callback_url": f"https://{host}/hook"}
        refused = app.client.post("/v1/jobs", files=files_of(photo_jpeg), data=form)
    name = host.strip("[]")
    assert refused.status_code == 422
    assert refused.json() == {
        "error": {
            "code": "callback_refused",
            "message": f"the callback host {name!r} is not a public address (args.jobs.callback_hosts)",
        }
    }
    assert list(app.store.refs()) == []


@pytest.mark.parametrize("content", [None, b"not a certificate\n"])
def test_a_callback_ca_file_that_cannot_be_read_stops_the_runner_at_start(tmp_path, content):
    ca_file = tmp_path / "ca.pem"
    if content is not None:
        ca_file.write_bytes(content)
    config = JobsConfig(store=str(tmp_path / "jobs"), callback_ca_file=str(ca_file))
    store = JobStore(config.location(None), config.s3, JOBS)

    with pytest.raises(InvalidParameter, match="callback_ca_file .* is not a readable PEM file of CA certificates"):
        JobsRunner(config, store, KeyRing([]))
