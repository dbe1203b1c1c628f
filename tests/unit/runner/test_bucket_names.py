"""Names at the edges: keys too long for their records, reserved ``_errors/`` sources, symbolic links."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os

import pytest

from serve_app.runner.outcomes import Status
from storage.errors import InvalidKey, ObjectNotFound
from storage.keys import error_name, result_name
from storage.local import LocalStore
from tests.unit.runner.bucket_fixtures import make_worker


def run(coro):
    return asyncio.run(coro)


def records_of(out: LocalStore) -> dict[str, dict]:
    return {info.key: json.loads(out.get(info.key, max_bytes=1 << 20).data) for info in out.list(suffix=".json")}


def hashed_error_name(key: str) -> str:
    return f"_errors/_errors/{hashlib.sha256(key.encode()).hexdigest()}.json"


LONG_KEY = "/".join(["d" * 200] * 4) + "/" + "p" * 216  # 1020 bytes, no extension: "<key>.json" is 1025
NAME_253 = "n" * 251 + ".j"  # a 253-byte file name: its ".json" record name would be 256 bytes
NAME_251 = "n" * 247 + ".jpg"  # a 251-byte file name: result and record names fit, "_errors/<name>.json" does not


def test_keys_whose_record_names_do_not_fit_get_an_invalid_key_record_and_scans_go_on(
    tmp_path, local_backend, job_ctx, photo_jpeg
):
    source = LocalStore(tmp_path / "in")
    assert len(LONG_KEY.encode()) == 1020 and len(NAME_253.encode()) == 253
    for key in (LONG_KEY, NAME_253, NAME_251, "ok.jpg"):
        source.put(key, photo_jpeg, content_type="image/jpeg")
    worker = make_worker(tmp_path, local_backend, job_ctx)
    route = worker.table.routes[0]
    outcomes = run(worker.reconcile(route))
    assert sorted((o.key, o.status, o.code) for o in outcomes) == sorted(
        [
            (LONG_KEY, Status.FAILED, "invalid_key"),
            (NAME_253, Status.FAILED, "invalid_key"),
            (NAME_251, Status.DONE, None),
            ("ok.jpg", Status.DONE, None),
        ]
    )
    records = records_of(LocalStore(tmp_path / "out"))
    for key in (LONG_KEY, NAME_253):
        record = records[hashed_error_name(key)]
        assert (record["kind"], record["source"]["key"], record["error"]["code"]) == ("error", key, "invalid_key")
    assert records["n" * 247 + ".json"]["source"]["key"] == NAME_251
    assert not worker.route_states()["r"].scan_failing
    assert run(worker.reconcile(route)) == []  # all recorded: the next scan reads nothing
    assert {o.status for o in run(make_worker(tmp_path, local_backend, job_ctx).reconcile(route))} == {Status.SKIPPED}


def test_result_and_error_records_never_share_a_name_so_no_record_flips_on_restart(
    tmp_path, local_backend, job_ctx, photo_jpeg
):
    source = LocalStore(tmp_path / "in")
    source.put("x.jpg", b"not a photo", content_type="image/jpeg")  # → an error record
    source.put("_errors/x.jpg.jpg", photo_jpeg, content_type="image/jpeg")  # its result would be _errors/x.jpg.json
    first = make_worker(tmp_path, local_backend, job_ctx)
    outcomes = run(first.reconcile(first.table.routes[0]))
    assert sorted((o.key, o.status, o.code) for o in outcomes) == [
        ("_errors/x.jpg.jpg", Status.FAILED, "invalid_key"),
        ("x.jpg", Status.FAILED, "unsupported_image"),
    ]
    before = records_of(LocalStore(tmp_path / "out"))
    assert before["_errors/x.jpg.json"]["source"]["key"] == "x.jpg"
    assert before[hashed_error_name("_errors/x.jpg.jpg")]["source"]["key"] == "_errors/x.jpg.jpg"
    for _ in range(2):  # restarts: every record stays as it is
        again = make_worker(tmp_path, local_backend, job_ctx)
        assert {o.status for o in run(again.reconcile(again.table.routes[0]))} == {Status.SKIPPED}
    assert records_of(LocalStore(tmp_path / "out")) == before


EDGE_KEYS = ["x.jpg", "_errors/x.jpg.jpg", "_errors/x.jpg", "a/_errors/b.jpg", "_errors/_errors/y", LONG_KEY]


@pytest.mark.parametrize("key", [*EDGE_KEYS, NAME_251, NAME_253])
def test_no_result_name_is_an_error_record_name(key):
    names = {error_name(other) for other in [*EDGE_KEYS, NAME_251, NAME_253]}
    assert len(names) == len(EDGE_KEYS) + 2
    if key.startswith("_errors/") or key in (LONG_KEY, NAME_253):  # no result at all: only an error record
        with pytest.raises(InvalidKey):
            result_name(key, "json")
    else:
        assert result_name(key, "json") not in names


def test_local_routes_never_follow_symbolic_links(tmp_path, local_backend, job_ctx, photo_jpeg):
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "key.jpg").write_bytes(photo_jpeg)
    source = LocalStore(tmp_path / "in")
    source.put("mine.jpg", photo_jpeg, content_type="image/jpeg")
    os.symlink(secret / "key.jpg", tmp_path / "in" / "link.jpg")
    os.symlink(secret, tmp_path / "in" / "linked-folder")
    worker = make_worker(tmp_path, local_backend, job_ctx)
    route = worker.table.routes[0]
    assert [(o.key, o.status) for o in run(worker.reconcile(route))] == [("mine.jpg", Status.DONE)]
    for key in ("link.jpg", "linked-folder/key.jpg"):  # an event naming them finds nothing either
        with pytest.raises(ObjectNotFound):
            source.head(key)
        with pytest.raises(ObjectNotFound):
            source.get(key, max_bytes=1 << 20)
        assert run(worker.process_object(route, key)).status is Status.GONE
    assert sorted(records_of(LocalStore(tmp_path / "out"))) == ["mine.json"]
