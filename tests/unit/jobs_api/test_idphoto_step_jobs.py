"""The ID photo's steps are jobs like the others: an asynchronous job (``POST /v1/jobs`` with ``task=idphoto-matte``)
answers the bytes of the synchronous step route, a key allowed ``idphoto`` may run its steps, and bucket folder
routes chain the steps, each on the output of the one before."""

from __future__ import annotations

import asyncio
import io
import json

import numpy as np
from PIL import Image

from serve_app.runner.outcomes import Status
from storage.local import LocalStore
from tests.unit.jobs_api.conftest import KEYS, make_jobs_app
from tests.unit.runner.bucket_fixtures import make_worker


def files_of(photo: bytes) -> dict:
    return {"image": ("me.jpg", photo, "image/jpeg")}


def test_a_step_as_an_asynchronous_job_answers_the_bytes_of_its_route(jobs_app, photo_jpeg):
    client = jobs_app.client
    accepted = client.post("/v1/jobs", files=files_of(photo_jpeg), data={"task": "idphoto-matte"})
    assert accepted.status_code == 202, accepted.text
    done = jobs_app.wait(accepted.json()["id"])
    assert (done["status"], done["task"], done["params"]) == ("succeeded", "idphoto-matte", {})
    result = client.get(done["result"]["url"])
    sync = client.post("/v1/idphoto/matte", files=files_of(photo_jpeg))
    assert result.status_code == sync.status_code == 200
    assert result.content == sync.content and result.headers["content-type"] == "image/png"
    assert Image.open(io.BytesIO(result.content)).mode == "RGBA"


def test_a_step_refuses_at_submit_an_option_it_does_not_take(jobs_app, photo_jpeg):
    refused = jobs_app.client.post("/v1/jobs", files=files_of(photo_jpeg), data={"task": "idphoto-matte", "spec": "x"})
    assert refused.status_code == 422
    assert refused.json()["error"]["message"] == "spec: not an option of the matte step; it takes dpi, matting"


def test_a_key_allowed_the_id_photo_may_run_its_steps_and_no_other_job(tmp_path, local_backend, job_ctx, photo_jpeg):
    app = make_jobs_app(tmp_path, local_backend, job_ctx, keys=KEYS)
    bob = {"Authorization": "Bearer pk_b"}  # tasks: [idphoto]
    with app.client:
        matte = app.client.post("/v1/jobs", files=files_of(photo_jpeg), data={"task": "idphoto-matte"}, headers=bob)
        assert matte.status_code == 202, matte.text
        assert app.wait(matte.json()["id"], headers=bob)["status"] == "succeeded"
        route = app.client.post("/v1/idphoto/matte", files=files_of(photo_jpeg), headers=bob)
        assert route.status_code == 200
        cartoon = app.client.post("/v1/jobs", files=files_of(photo_jpeg), data={"task": "cartoon"}, headers=bob)
        assert (cartoon.status_code, cartoon.json()["error"]["code"]) == (403, "forbidden")


def test_bucket_routes_chain_the_steps_matte_then_background(tmp_path, local_backend, job_ctx, photo_jpeg):
    LocalStore(tmp_path / "in").put("me.jpg", photo_jpeg, content_type="image/jpeg")
    matte = make_worker(tmp_path, local_backend, job_ctx, task="idphoto-matte")
    assert asyncio.run(matte.process_object(matte.table.routes[0], "me.jpg")).status is Status.DONE
    out = LocalStore(tmp_path / "out")
    record = json.loads(out.get("me.json", max_bytes=1 << 20).data)
    assert (record["task"], record["result_key"], record["meta"]["job"]) == ("idphoto-matte", "me.png", "idphoto-matte")
    cut = np.asarray(Image.open(io.BytesIO(out.get("me.png", max_bytes=1 << 24).data)))
    assert cut.shape == (256, 256, 4) and cut[0, 0, 3] == 0 and cut[200, 128, 3] == 255

    second = tmp_path / "second"
    LocalStore(second / "in").put("me.png", out.get("me.png", max_bytes=1 << 24).data, content_type="image/png")
    params = {"background": "red", "format": "png"}
    background = make_worker(second, local_backend, job_ctx, task="idphoto-background", params=params)
    assert asyncio.run(background.process_object(background.table.routes[0], "me.png")).status is Status.DONE
    photo = np.asarray(Image.open(io.BytesIO(LocalStore(second / "out").get("me.png", max_bytes=1 << 24).data)))
    assert photo.shape == (256, 256, 3) and (photo[cut[..., 3] == 0] == (0xD7, 0x45, 0x32)).all()
