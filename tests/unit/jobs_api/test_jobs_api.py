"""The jobs API end to end in-process: submit, poll, result bytes equal to the synchronous route's, errors at submit
time, idempotency, signed callbacks, cancel, list, back-pressure, expiry. Whole bodies where they can be."""

from __future__ import annotations

import base64
import json
import time
from datetime import UTC, datetime, timedelta

from serve_app.jobs import JOBS
from serve_app.runner.callbacks import SIGNATURE_HEADER, verify
from tests.unit.jobs_api.conftest import SECRET


def files_of(photo: bytes) -> dict:
    return {"image": ("me.jpg", photo, "image/jpeg")}


def test_a_job_answers_202_then_succeeds_with_the_bytes_of_the_synchronous_route(jobs_app, photo_jpeg):
    client = jobs_app.client
    accepted = client.post("/v1/jobs", files=files_of(photo_jpeg), data={"task": "restore", "upscale": "2"})
    assert accepted.status_code == 202, accepted.text
    body = accepted.json()
    job_id = body["id"]
    assert body == {
        "id": job_id,
        "status": "queued",
        "status_url": f"/v1/jobs/{job_id}",
        "result_url": f"/v1/jobs/{job_id}/result",
    }
    assert accepted.headers["location"] == f"/v1/jobs/{job_id}"
    done = jobs_app.wait(job_id)
    assert (done["status"], done["progress"], done["task"], done["params"]) == (
        "succeeded",
        1.0,
        "restore",
        {"upscale": "2"},
    )
    assert done["result"]["url"] == f"/v1/jobs/{job_id}/result" and "error" not in done
    result = client.get(f"/v1/jobs/{job_id}/result")
    sync = client.post("/v1/restore", files=files_of(photo_jpeg), data={"upscale": "2"})
    assert result.status_code == 200
    assert result.content == sync.content
    portrait = {name: value for name, value in sync.headers.items() if name.startswith("x-portrait")}
    assert {name: value for name, value in result.headers.items() if name.startswith("x-portrait")} == portrait
    assert result.headers["content-type"] == sync.headers["content-type"] == "image/jpeg"
    assert done["result"]["bytes"] == len(sync.content)


def test_a_json_job_with_return_json_answers_like_the_route(jobs_app, photo_jpeg):
    client = jobs_app.client
    payload = {"task": "idphoto", "params": {"spec": "cn-1inch", "return": "json"}}
    accepted = client.post("/v1/jobs", json={**payload, "image_b64": base64.b64encode(photo_jpeg).decode()})
    assert accepted.status_code == 202, accepted.text
    jobs_app.wait(accepted.json()["id"])
    stored = client.get(accepted.json()["result_url"]).json()
    sync = client.post("/v1/idphoto", files=files_of(photo_jpeg), data=payload["params"]).json()
    assert set(stored) == set(sync) == {"image_b64", "media_type", "meta", "report"}
    assert stored["image_b64"] == sync["image_b64"] and stored["report"] == sync["report"]
    assert {**stored["meta"], "timings_ms": None} == {**sync["meta"], "timings_ms": None}


def test_a_job_keeps_the_id_photos_sheet_and_hd_copy_like_the_route(jobs_app, photo_jpeg):
    client = jobs_app.client
    params = {"layout": "4r", "hd": "true", "return": "json"}
    accepted = client.post("/v1/jobs", files=files_of(photo_jpeg), data={"task": "idphoto", **params})
    assert accepted.status_code == 202, accepted.text
    jobs_app.wait(accepted.json()["id"])
    stored = client.get(accepted.json()["result_url"]).json()
    sync = client.post("/v1/idphoto", files=files_of(photo_jpeg), data=params).json()
    companions = {"sheet_b64", "sheet_media_type", "hd_b64", "hd_media_type"}
    assert set(stored) == set(sync) == {"image_b64", "media_type", "meta", "report", "hd"} | companions
    assert {key: stored[key] for key in companions | {"hd"}} == {key: sync[key] for key in companions | {"hd"}}


def test_a_bad_option_is_422_at_submit_like_the_route(jobs_app, photo_jpeg):
    client = jobs_app.client
    refused = client.post("/v1/jobs", files=files_of(photo_jpeg), data={"task": "restore", "upscale": "3"})
    sync = client.post("/v1/restore", files=files_of(photo_jpeg), data={"upscale": "3"})
    assert refused.status_code == sync.status_code == 422
    assert refused.json() == sync.json()
    assert list(jobs_app.store.refs()) == []


def test_an_unknown_or_missing_task_is_422(jobs_app, photo_jpeg):
    unknown = jobs_app.client.post("/v1/jobs", files=files_of(photo_jpeg), data={"task": "paint"})
    assert (unknown.status_code, unknown.json()["error"]["message"]) == (
        422,
        f"unknown task 'paint'; tasks: {', '.join(JOBS)}",
    )
    missing = jobs_app.client.post("/v1/jobs", files=files_of(photo_jpeg))
    assert missing.status_code == 422


def test_an_image_that_cannot_be_read_is_accepted_then_fails_with_a_4xx_code(jobs_app):
    client = jobs_app.client
    accepted = client.post(
        "/v1/jobs", files={"image": ("x.jpg", b"not an image", "image/jpeg")}, data={"task": "cartoon"}
    )
    done = jobs_app.wait(accepted.json()["id"])
    assert done["status"] == "failed" and "result" not in done
    assert done["error"]["code"] == "unsupported_image"
    assert client.get(accepted.json()["result_url"]).status_code == 409


def test_the_same_idempotency_key_gives_the_same_job(jobs_app, photo_jpeg):
    client = jobs_app.client
    form = {"task": "cartoon", "idempotency_key": "order-17"}
    first = client.post("/v1/jobs", files=files_of(photo_jpeg), data=form)
    second = client.post("/v1/jobs", files=files_of(photo_jpeg), data=form)
    assert (first.status_code, second.status_code) == (202, 200)
    assert first.json()["id"] == second.json()["id"]
    other = client.post("/v1/jobs", files=files_of(photo_jpeg), data={**form, "idempotency_key": "order-18"})
    assert other.json()["id"] != first.json()["id"]


def test_the_callback_is_signed_and_carries_the_status(jobs_app, photo_jpeg):
    client = jobs_app.client
    form = {"task": "cartoon", "callback_url": "http://127.0.0.1:9/hook"}
    job_id = client.post("/v1/jobs", files=files_of(photo_jpeg), data=form).json()["id"]
    done = jobs_app.wait(job_id)
    ((target, body, headers),) = jobs_app.receiver.calls
    assert (target.host, target.address, target.port) == ("127.0.0.1", "127.0.0.1", 9)
    assert verify(SECRET, headers[SIGNATURE_HEADER], body, now_s=time.time())
    assert not verify("another-secret", headers[SIGNATURE_HEADER], body, now_s=time.time())
    sent = json.loads(body)
    signed = {"key_id": "anonymous", "callback_url": form["callback_url"]}
    assert sent == {**done, "updated_at": sent["updated_at"], **signed}
    assert headers["X-Portrait-Key-Id"] == "anonymous"
    assert list(jobs_app.store.root.list("in/")) == []  # the input goes once the job has ended and called back


def test_a_callback_to_a_private_address_not_listed_is_refused_at_submit(jobs_app, photo_jpeg):
    answer = jobs_app.client.post(
        "/v1/jobs", files=files_of(photo_jpeg), data={"task": "cartoon", "callback_url": "http://10.1.2.3/hook"}
    )
    assert answer.status_code == 422
    assert answer.json()["error"] == {
        "code": "callback_refused",
        "message": "the callback host '10.1.2.3' is not a public address (args.jobs.callback_hosts)",
    }


def test_jobs_list_by_status(jobs_app, photo_jpeg):
    client = jobs_app.client
    good = client.post("/v1/jobs", files=files_of(photo_jpeg), data={"task": "cartoon"}).json()["id"]
    bad = client.post("/v1/jobs", files={"image": ("x", b"nope", "image/jpeg")}, data={"task": "cartoon"}).json()["id"]
    jobs_app.wait(good), jobs_app.wait(bad)
    assert [job["id"] for job in client.get("/v1/jobs?status=succeeded").json()["jobs"]] == [good]
    assert [job["id"] for job in client.get("/v1/jobs?status=failed").json()["jobs"]] == [bad]
    assert sorted(job["id"] for job in client.get("/v1/jobs").json()["jobs"]) == sorted([good, bad])


def test_deleting_a_finished_job_deletes_everything(jobs_app, photo_jpeg):
    client = jobs_app.client
    job_id = client.post("/v1/jobs", files=files_of(photo_jpeg), data={"task": "cartoon"}).json()["id"]
    jobs_app.wait(job_id)
    assert client.delete(f"/v1/jobs/{job_id}").status_code == 204
    assert client.get(f"/v1/jobs/{job_id}").status_code == 404
    assert list(jobs_app.store.root.list()) == []


def test_an_expired_job_is_410_and_the_sweep_deletes_its_objects(jobs_app, photo_jpeg):
    client = jobs_app.client
    job_id = client.post("/v1/jobs", files=files_of(photo_jpeg), data={"task": "cartoon"}).json()["id"]
    jobs_app.wait(job_id)
    assert len(list(jobs_app.store.root.list())) >= 3  # record, result, result record
    later = datetime.now(UTC) + timedelta(days=2)
    jobs_app.service._clock = lambda: later
    gone = client.get(f"/v1/jobs/{job_id}")
    assert (gone.status_code, gone.json()["error"]["code"]) == (410, "gone")
    assert jobs_app.runner.sweep(now=later) >= 3
    assert list(jobs_app.store.root.list()) == []
