"""``LocalStore``: the shared store contract, plus what only a folder can get wrong (sidecars, temp files, races)."""

from __future__ import annotations

import hashlib
import os
import threading
import tracemalloc
from pathlib import Path

import pytest

from storage.errors import InvalidKey, ObjectStoreError
from storage.local import HIDDEN_DIR, LocalStore
from tests.unit.storage.store_contract import ObjectStoreContract, race_to_create


@pytest.fixture
def store(tmp_path: Path) -> LocalStore:
    return LocalStore(tmp_path / "bucket")


class TestLocalStoreContract(ObjectStoreContract):
    pass


def test_objects_are_plain_files_and_bookkeeping_stays_out_of_listings(store: LocalStore) -> None:
    store.put("in/cat.jpg", b"cat", content_type="image/jpeg", metadata={"k": "v"})

    assert (store.root / "in" / "cat.jpg").read_bytes() == b"cat"
    assert (store.root / HIDDEN_DIR).is_dir()
    assert [info.key for info in store.list()] == ["in/cat.jpg"]


def test_bookkeeping_folder_is_not_a_key(store: LocalStore) -> None:
    store.put("a.jpg", b"x", content_type="image/jpeg", metadata={"k": "v"})

    with pytest.raises(InvalidKey):
        store.put(f"{HIDDEN_DIR}/meta/x.json", b"{}", content_type="application/json")
    with pytest.raises(InvalidKey):
        store.head(f"{HIDDEN_DIR}/meta/a.jpg.json")
    assert list(store.list(f"{HIDDEN_DIR}/")) == []


def test_file_dropped_by_hand_is_an_object(store: LocalStore) -> None:
    (store.root / "in").mkdir(parents=True)
    (store.root / "in" / "dropped.png").write_bytes(b"png bytes")

    described = store.head("in/dropped.png")

    assert described.etag == hashlib.md5(b"png bytes").hexdigest()
    assert (described.content_type, described.user_metadata) == ("image/png", {})
    assert [info.key for info in store.list("in/")] == ["in/dropped.png"]


def test_file_replaced_behind_the_store_loses_stale_metadata(store: LocalStore) -> None:
    store.put("a.jpg", b"old", content_type="image/png", metadata={"k": "v"})
    (store.root / "a.jpg").write_bytes(b"replaced by hand")

    described = store.head("a.jpg")

    assert described.etag == hashlib.md5(b"replaced by hand").hexdigest()
    assert (described.content_type, described.user_metadata) == ("image/jpeg", {})


def test_put_leaves_no_temporary_files(store: LocalStore) -> None:
    store.put("a.jpg", b"1", content_type="image/jpeg", metadata={"k": "v"})
    store.put("a.jpg", b"2", content_type="image/jpeg")

    assert list((store.root / HIDDEN_DIR / "tmp").iterdir()) == []


def test_readers_never_see_a_partial_overwrite(store: LocalStore) -> None:
    versions = [b"a" * 300_000, b"b" * 200_000]
    store.put("photo.jpg", versions[0], content_type="image/jpeg")
    done = threading.Event()

    def overwrite() -> None:
        for round_index in range(60):
            store.put("photo.jpg", versions[round_index % 2], content_type="image/jpeg")
        done.set()

    writer = threading.Thread(target=overwrite)
    writer.start()
    seen = set()
    while not done.is_set():
        stored = store.get("photo.jpg", max_bytes=1_000_000)
        assert stored.data in versions
        assert stored.info.etag == hashlib.md5(stored.data).hexdigest()
        seen.add(stored.data[:1])
    writer.join()
    assert seen  # the reader ran while the writer was busy


def test_failed_write_keeps_the_old_object_and_raises(store: LocalStore, monkeypatch: pytest.MonkeyPatch) -> None:
    store.put("a.jpg", b"old", content_type="image/jpeg")
    real_replace = os.replace

    def full_disk(source: str, target: str) -> None:
        if Path(target) == store.root / "a.jpg":
            raise OSError(28, "No space left on device")
        real_replace(source, target)

    monkeypatch.setattr(os, "replace", full_disk)

    with pytest.raises(ObjectStoreError, match="No space left"):
        store.put("a.jpg", b"new", content_type="image/jpeg")

    monkeypatch.undo()
    assert store.get("a.jpg", max_bytes=10).data == b"old"
    assert list((store.root / HIDDEN_DIR / "tmp").iterdir()) == []


def test_key_under_an_existing_object_is_refused(store: LocalStore) -> None:
    store.put("a", b"file", content_type="text/plain")

    with pytest.raises(InvalidKey):
        store.put("a/b.jpg", b"x", content_type="image/jpeg")


def test_key_naming_a_folder_of_objects_is_refused_and_not_found(store: LocalStore) -> None:
    store.put("a/b.jpg", b"x", content_type="image/jpeg")

    with pytest.raises(InvalidKey):
        store.put("a", b"x", content_type="text/plain")
    assert not store.exists("a")


def test_stores_on_different_folders_share_nothing(tmp_path: Path) -> None:
    first, second = LocalStore(tmp_path / "one"), LocalStore(tmp_path / "two")
    first.put("a.jpg", b"1", content_type="image/jpeg")

    assert not second.exists("a.jpg")
    assert list(second.list()) == []


def test_put_file_copies_a_chunk_at_a_time_never_the_whole_file(store: LocalStore, tmp_path: Path) -> None:
    data = os.urandom(8 << 20)
    source = tmp_path / "result.mp4"
    source.write_bytes(data)
    tracemalloc.start()
    try:
        store.put_file("out/result.mp4", source, content_type="video/mp4")
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert peak_bytes < 3 << 20  # one 1 MiB chunk and bookkeeping; put of the bytes would hold all 8 MiB
    assert (store.root / "out" / "result.mp4").read_bytes() == data


def test_open_read_of_a_file_dropped_by_hand_hashes_it_then_reads_it_from_the_start(store: LocalStore) -> None:
    data = os.urandom(3 << 20)
    (store.root / "in").mkdir(parents=True)
    (store.root / "in" / "dropped.mp4").write_bytes(data)  # no sidecar: the ETag comes from the bytes

    with store.open_read("in/dropped.mp4") as reader:
        assert (reader.info.etag, reader.info.content_type) == (hashlib.md5(data).hexdigest(), "video/mp4")
        assert b"".join(reader) == data


def test_open_read_streams_a_chunk_at_a_time_never_the_whole_file(store: LocalStore, tmp_path: Path) -> None:
    data = os.urandom(8 << 20)
    source = tmp_path / "result.mp4"
    source.write_bytes(data)
    store.put_file("out/result.mp4", source, content_type="video/mp4")
    digest = hashlib.md5()
    tracemalloc.start()
    try:
        with store.open_read("out/result.mp4") as reader:
            for chunk in reader:
                digest.update(chunk)
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert peak_bytes < 3 << 20  # one 1 MiB chunk and bookkeeping; get would hold all 8 MiB
    assert digest.hexdigest() == hashlib.md5(data).hexdigest()


def test_a_file_cut_short_while_read_fails_the_read(store: LocalStore) -> None:
    data = os.urandom(3 << 20)
    store.put("out/clip.mp4", data, content_type="video/mp4")

    with store.open_read("out/clip.mp4") as reader:
        first = next(reader)
        os.truncate(store.root / "out" / "clip.mp4", len(first) + 10)  # rewritten in place by someone else
        with pytest.raises(ObjectStoreError, match="shrank"):
            list(reader)
        assert reader.closed


@pytest.mark.parametrize("round_", range(20))
def test_racing_creates_of_one_key_have_exactly_one_winner(tmp_path: Path, round_: int) -> None:
    """Eight writers, each through its own store (as replicas sharing the folder would be), create one key at once."""
    stores = [LocalStore(tmp_path / "bucket") for _ in range(8)]

    won = race_to_create(stores, "idem/owner/key.json")

    assert len(won) == 1
    assert stores[0].get("idem/owner/key.json", max_bytes=100).data == won[0]
    assert stores[0].head("idem/owner/key.json").etag == hashlib.md5(won[0]).hexdigest()
