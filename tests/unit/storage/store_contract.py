"""The behaviour every ``ObjectStore`` must show, written once and run against each implementation.

A test module subclasses ``ObjectStoreContract`` (named so pytest does not collect it on its own) and provides a
``store`` fixture yielding an empty store.
"""

from __future__ import annotations

import hashlib
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from deployments.common.errors import InvalidParameter
from storage.base import ObjectStore
from storage.errors import InvalidKey, ObjectNotFound, ObjectTooLarge, PreconditionFailed

UNICODE_KEY = "in/Zoë & friends/photo 1+2 %41 — 写真.jpg"
BAD_KEYS = ["", "../x", "in/../../x", "/etc/passwd", "in\\x.jpg", "in/x\x00.jpg", "in//x.jpg", "in/", "./x"]
CLOCK_SLACK = timedelta(seconds=60)


class _RecordingFile:
    """A writable file that keeps each ``write`` apart, to see how a store streams."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    def write(self, chunk: bytes) -> int:
        self.chunks.append(bytes(chunk))
        return len(chunk)


def race_to_create(stores: list[ObjectStore], key: str) -> list[bytes]:
    """Each store (as one replica would hold it) creates ``key`` with ``if_absent`` at once; the bodies that won."""
    start = threading.Barrier(len(stores))
    won: list[bytes] = []

    def create(index: int) -> None:
        body = f"writer {index}".encode()
        start.wait()
        try:
            stores[index].put(key, body, content_type="application/json", if_absent=True)
            won.append(body)
        except PreconditionFailed:
            pass

    threads = [threading.Thread(target=create, args=(index,)) for index in range(len(stores))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return won


class ObjectStoreContract:
    def test_satisfies_the_protocol(self, store: ObjectStore) -> None:
        assert isinstance(store, ObjectStore)

    def test_put_then_get_round_trips_bytes_unicode_key_and_metadata(self, store: ObjectStore) -> None:
        data = b"\xff\xd8 portrait bytes"
        store.put(UNICODE_KEY, data, content_type="image/jpeg", metadata={"Source-ETag": "abc", "job": "restore"})

        stored = store.get(UNICODE_KEY, max_bytes=1024)

        assert stored.data == data
        assert stored.info.key == UNICODE_KEY
        assert stored.info.size_bytes == len(data)
        assert stored.info.etag == hashlib.md5(data).hexdigest()
        assert stored.info.content_type == "image/jpeg"
        assert stored.info.user_metadata == {"source-etag": "abc", "job": "restore"}

    def test_put_reports_what_head_reports(self, store: ObjectStore) -> None:
        written = store.put("a.png", b"png", content_type="image/png", metadata={"k": "v"})

        described = store.head("a.png")

        assert (written.key, written.size_bytes, written.etag) == (described.key, described.size_bytes, described.etag)
        assert (written.content_type, written.user_metadata) == (described.content_type, described.user_metadata)
        assert written.version_id == described.version_id
        assert abs(written.last_modified - described.last_modified) < timedelta(seconds=2)

    def test_head_gives_an_aware_recent_timestamp(self, store: ObjectStore) -> None:
        store.put("t.jpg", b"x", content_type="image/jpeg")

        modified = store.head("t.jpg").last_modified

        assert modified.tzinfo is not None
        assert abs(datetime.now(UTC) - modified) < CLOCK_SLACK

    def test_overwrite_replaces_content_metadata_and_etag(self, store: ObjectStore) -> None:
        first = store.put("k.jpg", b"first", content_type="image/jpeg", metadata={"n": "1"})
        second = store.put("k.jpg", b"second!", content_type="image/png")

        assert second.etag != first.etag
        assert store.get("k.jpg", max_bytes=100).data == b"second!"
        described = store.head("k.jpg")
        assert (described.content_type, described.user_metadata) == ("image/png", {})

    def test_empty_object_round_trips(self, store: ObjectStore) -> None:
        store.put("empty.bin", b"", content_type="application/octet-stream")

        stored = store.get("empty.bin", max_bytes=0)

        assert stored.data == b""
        assert stored.info.etag == hashlib.md5(b"").hexdigest()

    def test_get_accepts_exactly_max_bytes(self, store: ObjectStore) -> None:
        store.put("cap.bin", b"12345", content_type="application/octet-stream")

        assert store.get("cap.bin", max_bytes=5).data == b"12345"

    def test_get_refuses_an_object_over_max_bytes(self, store: ObjectStore) -> None:
        store.put("big.bin", b"x" * 2048, content_type="application/octet-stream")

        with pytest.raises(ObjectTooLarge) as refused:
            store.get("big.bin", max_bytes=2047)

        assert (refused.value.size_bytes, refused.value.max_bytes, refused.value.http_status) == (2048, 2047, 413)
        assert refused.value.code == "image_too_large"
        assert refused.value.head == b"x" * 64  # what a reader of media needs to say which kind it refused

    def test_get_to_streams_a_large_object_to_a_file_in_chunks(self, store: ObjectStore) -> None:
        data = bytes(range(256)) * (4096 * 3 + 1)  # 3 MiB and a bit: more than one chunk
        store.put("model.bin", data, content_type="application/octet-stream")
        writes = _RecordingFile()

        info = store.get_to("model.bin", writes, max_bytes=len(data))

        assert b"".join(writes.chunks) == data and info.size_bytes == len(data)
        assert len(writes.chunks) >= 4 and max(map(len, writes.chunks)) <= 1 << 20  # never the whole object at once

    def test_get_to_refuses_an_object_over_max_bytes(self, store: ObjectStore) -> None:
        store.put("big.bin", b"x" * 2048, content_type="application/octet-stream")

        with pytest.raises(ObjectTooLarge):
            store.get_to("big.bin", _RecordingFile(), max_bytes=2047)

    def test_open_read_describes_the_object_then_streams_it_in_chunks(self, store: ObjectStore) -> None:
        data = bytes(range(256)) * (4096 * 3 + 1)  # 3 MiB and a bit: more than one chunk
        written = store.put("out/clip.mp4", data, content_type="video/mp4", metadata={"Job": "restore"})

        with store.open_read("out/clip.mp4") as reader:
            info = reader.info
            chunks = list(reader)
            assert reader.closed  # read to the end: released without waiting for the with

        assert b"".join(chunks) == data
        assert len(chunks) >= 4 and max(map(len, chunks)) <= 1 << 20  # never the whole object at once
        described = (info.key, info.size_bytes, info.etag, info.content_type, info.user_metadata)
        assert described == ("out/clip.mp4", len(data), written.etag, "video/mp4", {"job": "restore"})

    def test_open_read_of_an_empty_object_yields_no_bytes(self, store: ObjectStore) -> None:
        store.put("empty.bin", b"", content_type="application/octet-stream")

        with store.open_read("empty.bin") as reader:
            assert (reader.info.size_bytes, list(reader)) == (0, [])

    def test_a_reader_closed_early_reads_no_more(self, store: ObjectStore) -> None:
        data = bytes(range(256)) * (4096 * 3)
        store.put("big.bin", data, content_type="application/octet-stream")

        reader = store.open_read("big.bin")
        first = next(reader)
        reader.close()
        reader.close()  # twice is harmless (the route closes, then its with does)

        assert data.startswith(first) and len(first) < len(data)
        assert reader.closed and list(reader) == []

    def test_put_file_stores_the_file_as_put_stores_its_bytes(self, store: ObjectStore, tmp_path: Path) -> None:
        data = bytes(range(256)) * (4096 * 3 + 1)  # 3 MiB and a bit: more than one chunk
        source = tmp_path / "result.mp4"
        source.write_bytes(data)

        written = store.put_file("out/clip.mp4", source, content_type="video/mp4", metadata={"Job": "restore"})

        stored = store.get("out/clip.mp4", max_bytes=len(data))
        assert stored.data == data
        expected = ("out/clip.mp4", len(data), hashlib.md5(data).hexdigest(), "video/mp4", {"job": "restore"})
        for info in (written, stored.info):
            assert (info.key, info.size_bytes, info.etag, info.content_type, info.user_metadata) == expected
        assert source.read_bytes() == data  # the file is the caller's: left as it was

    def test_put_file_replaces_an_object_written_by_put(self, store: ObjectStore, tmp_path: Path) -> None:
        store.put("out/clip.mp4", b"old", content_type="image/jpeg", metadata={"n": "1"})
        source = tmp_path / "new.mp4"
        source.write_bytes(b"new bytes")

        store.put_file("out/clip.mp4", source, content_type="video/mp4")

        assert store.get("out/clip.mp4", max_bytes=100).data == b"new bytes"
        assert (store.head("out/clip.mp4").content_type, store.head("out/clip.mp4").user_metadata) == ("video/mp4", {})

    def test_put_if_absent_writes_once_and_keeps_the_first(self, store: ObjectStore) -> None:
        first = store.put("idem/k.json", b"first", content_type="application/json", if_absent=True)

        with pytest.raises(PreconditionFailed):
            store.put("idem/k.json", b"second", content_type="application/json", if_absent=True)

        stored = store.get("idem/k.json", max_bytes=100)
        assert (stored.data, stored.info.etag, stored.info.content_type) == (b"first", first.etag, "application/json")

    def test_put_if_match_replaces_only_the_version_it_names(self, store: ObjectStore) -> None:
        old = store.put("idem/k.json", b"old", content_type="application/json")
        new = store.put("idem/k.json", b"new", content_type="application/json", if_match=old.etag)

        with pytest.raises(PreconditionFailed):
            store.put("idem/k.json", b"stale writer", content_type="application/json", if_match=old.etag)
        with pytest.raises(PreconditionFailed):
            store.put("idem/missing.json", b"x", content_type="application/json", if_match=old.etag)

        assert store.get("idem/k.json", max_bytes=100).data == b"new"
        assert new.etag == hashlib.md5(b"new").hexdigest()
        assert not store.exists("idem/missing.json")

    def test_missing_object_is_object_not_found(self, store: ObjectStore) -> None:
        with pytest.raises(ObjectNotFound):
            store.get("missing.jpg", max_bytes=10)
        with pytest.raises(ObjectNotFound):
            store.head("missing.jpg")
        with pytest.raises(ObjectNotFound):  # when opened, before any byte: a download can still answer an error
            store.open_read("missing.jpg")
        assert not store.exists("missing.jpg")

    def test_exists_after_put(self, store: ObjectStore) -> None:
        store.put("here.jpg", b"x", content_type="image/jpeg")

        assert store.exists("here.jpg")

    def test_delete_removes_and_is_idempotent(self, store: ObjectStore) -> None:
        store.put("gone.jpg", b"x", content_type="image/jpeg", metadata={"a": "b"})

        store.delete("gone.jpg")
        store.delete("gone.jpg")

        assert not store.exists("gone.jpg")
        assert list(store.list()) == []

    def test_list_filters_by_prefix_and_suffix(self, store: ObjectStore) -> None:
        keys = ["in/b.jpg", "in/a.png", "in/a.jpg", "in/sub/c.jpg", "in.jpg", "out/x.jpg", "in/é.jpg"]
        for key in keys:
            store.put(key, key.encode(), content_type="image/jpeg")

        def listed(prefix: str = "", suffix: str | None = None) -> list[str]:
            return sorted(info.key for info in store.list(prefix, suffix=suffix))  # order is not promised

        assert listed() == sorted(keys)
        assert listed("in/") == ["in/a.jpg", "in/a.png", "in/b.jpg", "in/sub/c.jpg", "in/é.jpg"]
        assert listed("in/", ".jpg") == ["in/a.jpg", "in/b.jpg", "in/sub/c.jpg", "in/é.jpg"]
        assert listed("in/a") == ["in/a.jpg", "in/a.png"]
        assert listed("nothing/") == []

    def test_list_describes_size_and_etag_but_not_metadata(self, store: ObjectStore) -> None:
        written = store.put("in/a.jpg", b"abc", content_type="image/jpeg", metadata={"k": "v"})

        (listed,) = store.list("in/")

        assert (listed.key, listed.size_bytes, listed.etag) == ("in/a.jpg", 3, written.etag)
        assert (listed.content_type, listed.user_metadata) == (None, {})
        assert listed.last_modified.tzinfo is not None

    @pytest.mark.parametrize("key", BAD_KEYS)
    def test_bad_keys_are_refused(self, store: ObjectStore, key: str) -> None:
        with pytest.raises(InvalidKey):
            store.put(key, b"x", content_type="image/jpeg")
        with pytest.raises(InvalidKey):
            store.get(key, max_bytes=10)
        with pytest.raises(InvalidKey):
            store.head(key)
        with pytest.raises(InvalidKey):
            store.open_read(key)
        with pytest.raises(InvalidKey):
            store.delete(key)

    def test_list_prefix_cannot_climb_out(self, store: ObjectStore) -> None:
        with pytest.raises(InvalidKey):
            store.list("../")

    @pytest.mark.parametrize("metadata", [{"name": "Zoë"}, {"bad name": "x"}, {"k": " padded "}, {"k": "x" * 2100}])
    def test_metadata_that_s3_headers_cannot_carry_is_refused(self, store: ObjectStore, metadata: dict) -> None:
        with pytest.raises(InvalidParameter):
            store.put("m.jpg", b"x", content_type="image/jpeg", metadata=metadata)
        assert not store.exists("m.jpg")
