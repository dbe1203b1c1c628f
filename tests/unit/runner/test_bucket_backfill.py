"""The backfill CLI's pieces: default output, HTTP error mapping, progress bar, a whole run in-process."""

from __future__ import annotations

import asyncio
import io
import json
import shutil
import threading
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from deployments.common.errors import InputError, InvalidParameter, ServiceError
from serve_app.backfill import ProgressBar, _remote_error, backfill, default_output, http_executor
from serve_app.cli import main
from serve_app.jobs import job_context, parse_job_params
from serve_app.registry import WHOLE_JOBS, job_entry
from serve_app.runner.outcomes import ObjectOutcome, Status
from serve_app.runner.worker import job_executor
from serve_app.settings import Settings
from storage.local import LocalStore
from tests.served import served


def test_default_output_sits_beside_the_input(tmp_path):
    assert default_output(str(tmp_path / "in")) == str(tmp_path / "in") + "-results"
    assert default_output("s3://photos/in/2024") == "s3://photos/in/2024-results"
    with pytest.raises(InvalidParameter, match="--out is required"):
        default_output("s3://photos")


def test_service_refusals_keep_their_code_and_failures_are_transient():
    refusal = _remote_error(
        415, json.dumps({"error": {"code": "unsupported_image", "message": "not an image"}}).encode()
    )
    assert isinstance(refusal, InputError) and (refusal.code, refusal.message) == ("unsupported_image", "not an image")
    assert isinstance(_remote_error(503, b"<html>busy</html>"), ServiceError)
    assert isinstance(_remote_error(429, b"{}"), ServiceError)


def test_the_progress_bar_draws_counts_and_a_bar():
    stream = io.StringIO()
    bar = ProgressBar(stream, width=10, min_redraw_s=0)
    bar.add(3)
    bar.add(1)
    bar.update(ObjectOutcome("r", "a", Status.DONE))
    bar.update(ObjectOutcome("r", "b", Status.FAILED))
    bar.close()
    assert bar.line().startswith("[#####.....] 2/4  done 1  skipped 0  failed 1  deferred 0  gone 0")
    assert stream.getvalue().endswith("\n") and "\r" in stream.getvalue()


def test_backfill_processes_a_folder_once(tmp_path, local_backend, job_ctx, photo_jpeg):
    source = LocalStore(tmp_path / "in")
    source.put("a.jpg", photo_jpeg, content_type="image/jpeg")
    source.put("sub/readme.txt", b"not a photo", content_type="text/plain")

    def once():
        return asyncio.run(
            backfill(
                str(tmp_path / "in"),
                "restore",
                execute=job_executor(local_backend, job_ctx),
                context=job_ctx,
                params={"format": "png"},
            )
        )

    first = once()
    assert (dict(first.counts), first.ok) == ({"done": 1, "failed": 1}, False)
    out = LocalStore(tmp_path / "in-results")
    assert sorted(i.key for i in out.list()) == ["_errors/sub/readme.txt.json", "a.json", "a.png"]
    assert dict(once().counts) == {"skipped": 2}


def test_the_cli_exits_non_zero_when_an_object_failed(tmp_path, mediapipe_dir, photo_jpeg, monkeypatch, capsys):
    monkeypatch.setenv("PORTRAIT_MODEL_STORE", str(mediapipe_dir.parent))
    LocalStore(tmp_path / "in").put("a.jpg", photo_jpeg, content_type="image/jpeg")
    assert main(["process", str(tmp_path / "in"), "--task", "restore", "--local", "--out", str(tmp_path / "o")]) == 0
    LocalStore(tmp_path / "in").put("b.txt", b"text", content_type="text/plain")
    assert main(["process", str(tmp_path / "in"), "--task", "restore", "--local", "--out", str(tmp_path / "o")]) == 1
    assert "failed 1, skipped 1" in capsys.readouterr().err
    assert main(["process", str(tmp_path / "in"), "--task", "restore", "--params", "{x"]) == 2


def test_the_backfill_sends_the_raw_photo_not_base64_json(tmp_path, local_backend, job_ctx, photo_jpeg):
    fields_in = {"upscale": 2, "only_center_face": True}
    params = parse_job_params("restore", fields_in, job_ctx)
    answer = json.dumps(asyncio.run(job_executor(local_backend, job_ctx)("restore", photo_jpeg, params)).to_json())
    seen: list[tuple[str, str, bytes]] = []

    class Service(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            body = self.rfile.read(int(self.headers["Content-Length"]))
            seen.append((self.path, self.headers["Content-Type"], body))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(answer.encode())

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Service)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        LocalStore(tmp_path / "in").put("a.jpg", photo_jpeg, content_type="image/jpeg")
        execute = http_executor(f"http://127.0.0.1:{server.server_address[1]}")
        summary = asyncio.run(
            backfill(str(tmp_path / "in"), "restore", execute=execute, context=job_ctx, params=fields_in)
        )
    finally:
        server.shutdown()
    assert dict(summary.counts) == {"done": 1}
    [(path, content_type, body)] = seen
    route, _, query = path.partition("?")
    assert (route, content_type, body) == ("/v1/restore", "application/octet-stream", photo_jpeg)
    fields = urllib.parse.parse_qs(query)
    assert (fields["return"], fields["upscale"], fields["only_center_face"]) == (["json"], ["2"], ["true"])


# --- the README's backfill over real photos (#32 finding 13) ----------------------------------------------------------

EVAL_PORTRAITS = ("idphoto/hivision_test0.jpg", "idphoto/hivision_test1.jpg", "idphoto/hivision_test2.jpg")
NEEDS_MORE = {"identity": "a second photo (reference_b64) beside each"}  # whole jobs one photo is not enough for
ALWAYS_RUN = ("restore", "idphoto", "cartoon")  # their engines are built in: never skipped
SMALL_PX = 480  # the copies' long side: a few seconds a job for the three


@pytest.fixture(scope="module")
def eval_folder(shared_dir, tmp_path_factory):
    """Small copies of the three ID-photo portraits (a JPEG, a WebP and an RGBA PNG, as in ../shared), a text file."""
    from PIL import Image

    folder = tmp_path_factory.mktemp("eval-photos")
    for name in EVAL_PORTRAITS:
        with Image.open(shared_dir / "eval" / name) as image:
            image.thumbnail((SMALL_PX, SMALL_PX))
            image.save(folder / Path(name).name, format=image.format or "PNG")
    (folder / "notes.txt").write_text("not a photo")
    return folder


@pytest.fixture(scope="module")
def service_url(local_backend, mediapipe_dir):
    """The HTTP API on the real engines in-process, served on 127.0.0.1 as ``portrait process --url`` reaches it."""

    from serve_app.routes import create_api

    app = create_api()
    app.state.backend = local_backend
    app.state.settings = Settings(model_store=str(mediapipe_dir.parent))
    with served(app) as url:
        yield url


def _needs_more(url: str, task: str, photo: bytes) -> str | None:
    """Why one photo with no options is not enough for ``task`` on this service (its weights absent from the test
    store: 503 ``model_unavailable``; an option it cannot do without: 422), else None."""
    request = urllib.request.Request(f"{url}{job_entry(task).route}?return=json", data=photo, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=120):
            return None
    except urllib.error.HTTPError as exc:
        error = json.loads(exc.read()).get("error", {})
        return f"{error.get('code')}: {error.get('message')}"


@pytest.mark.parametrize("task", [job for job in WHOLE_JOBS if job not in NEEDS_MORE])
def test_the_readme_backfill_of_a_whole_job_writes_a_result_and_a_record_per_photo(
    tmp_path, eval_folder, service_url, photo_jpeg, task, capsys
):
    if task not in ALWAYS_RUN and (why := _needs_more(service_url, task, photo_jpeg)):
        pytest.skip(f"{task} needs more than a photo here: {why}")
    shutil.copytree(eval_folder, tmp_path / "in")
    # `portrait process <folder> --task <job>`, as the README writes it: through the running service.
    assert main(["process", str(tmp_path / "in"), "--task", task, "--url", service_url]) == 1  # the text file failed
    assert "done 3, failed 1" in capsys.readouterr().err
    out = tmp_path / "in-results"
    error = json.loads((out / "_errors" / "notes.txt.json").read_text())
    assert error["error"]["code"] == "unsupported_image"
    context = job_context(Settings())
    for name in EVAL_PORTRAITS:
        record = json.loads((out / f"{Path(name).stem}.json").read_text())
        assert (out / record["result_key"]).is_file() and record["task"] == task
        # Stored with its defaults, and valid again: the params the route asked for (none).
        assert parse_job_params(task, record["params"], context) == parse_job_params(task, {}, context)
