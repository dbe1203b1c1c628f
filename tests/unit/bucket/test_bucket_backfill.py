"""The backfill CLI's pieces: default output, HTTP error mapping, progress bar, a whole run in-process."""

from __future__ import annotations

import asyncio
import io
import json

import pytest

from deployments.common.errors import InputError, InvalidParameter, ServiceError
from serve_app.backfill import ProgressBar, _remote_error, backfill, default_output
from serve_app.bucket.outcomes import ObjectOutcome, Status
from serve_app.bucket.runner import job_executor
from serve_app.cli import main
from storage.local import LocalStore


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
    bar.start(4)
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
