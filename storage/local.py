"""A local folder used as a bucket, with the same behaviour as ``S3Store`` (see ``storage.base``).

Layout under ``root``: objects are plain files at their key, so photos dropped in by hand are objects too.
Bookkeeping lives in a hidden tree that ``list`` never shows and keys may not enter::

    root/in/cat.jpg                          the object
    root/.portrait-store/meta/in/cat.jpg.json   content type, user metadata, ETag
    root/.portrait-store/tmp/<random>           writes in progress (same file system, so rename is atomic)

Symbolic links are never followed: a link (to a file or a folder, anywhere under ``root``) is not an object, so a
link dropped into a watched folder cannot make the service read, hash or describe a file outside it. A sidecar
whose name would be too long for the file system goes to ``meta-long/<sha256 of the key>.json`` instead.

The sidecar names the data file it describes (inode, size, mtime); a file replaced behind our back, or a sidecar
left over from a concurrent write, does not match and the object is described from its bytes alone.

Conditional writes (``if_absent``, ``if_match``) hold an ``flock`` on the key's folder while they check and land, so
they are atomic among themselves across processes sharing the folder; ``if_absent`` lands by hard link, which fails
if any object appeared meanwhile.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import logging
import mimetypes
import os
import stat
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from storage.base import READ_CHUNK_BYTES, HeadExists, ObjectInfo, ObjectReader, StoredObject, normalize_metadata
from storage.errors import (
    AccessDenied,
    InvalidKey,
    ObjectNotFound,
    ObjectStoreError,
    ObjectTooLarge,
    PreconditionFailed,
)
from storage.keys import is_valid_key, validate_key, validate_list_prefix
from storage.locks import file_lock

logger = logging.getLogger(__name__)

HIDDEN_DIR = ".portrait-store"
_FALLBACK_CONTENT_TYPE = "application/octet-stream"
_MAX_NAME_BYTES = 255  # one file name on ext4, XFS, APFS, NTFS

_Identity = tuple[int, int, int]  # (inode, size, mtime_ns) of a data file


class LocalStore(HeadExists):
    """Objects as files under ``root``; all caches belong to this instance."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).absolute()
        self._meta_root = self.root / HIDDEN_DIR / "meta"
        self._long_meta_root = self.root / HIDDEN_DIR / "meta-long"
        self._real_root = os.path.realpath(self.root)  # the root itself may be a link (/data -> /mnt/data)
        self._tmp_dir = self.root / HIDDEN_DIR / "tmp"
        self._bucket = str(self.root)  # how errors name this store
        # ETags computed from bytes (files without a matching sidecar), so listings do not rehash unchanged files.
        self._computed_etags: dict[str, tuple[_Identity, str]] = {}

    def __repr__(self) -> str:
        return f"LocalStore({str(self.root)!r})"

    def get(self, key: str, *, max_bytes: int) -> StoredObject:
        buffer = io.BytesIO()
        info = self.get_to(key, buffer, max_bytes=max_bytes)
        return StoredObject(buffer.getvalue(), info)

    def get_to(self, key: str, handle: BinaryIO, *, max_bytes: int) -> ObjectInfo:
        path = self._path(key)
        with self._os_errors(key), open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as file:
            st = os.fstat(file.fileno())
            if st.st_size > max_bytes:
                head = file.read(ObjectTooLarge.HEAD_BYTES)
                raise ObjectTooLarge(key, size_bytes=st.st_size, max_bytes=max_bytes, head=head)
            copied, digest, head = 0, hashlib.md5(), b""
            while chunk := file.read(min(READ_CHUNK_BYTES, max_bytes + 1 - copied)):
                copied += len(chunk)
                head = head or chunk[: ObjectTooLarge.HEAD_BYTES]
                if copied > max_bytes:  # the file grew after fstat (written in place by someone else)
                    raise ObjectTooLarge(key, size_bytes=copied, max_bytes=max_bytes, head=head)
                digest.update(chunk)
                handle.write(chunk)
            sidecar = self._matching_sidecar(key, st)
        etag = sidecar["etag"] if sidecar else digest.hexdigest()
        return self._info(key, st, etag, sidecar)

    def open_read(self, key: str) -> ObjectReader:
        path = self._path(key)
        with self._os_errors(key):
            file = open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb")
        try:
            with self._os_errors(key):
                st = os.fstat(file.fileno())
                sidecar = self._matching_sidecar(key, st)
                etag = sidecar["etag"] if sidecar else self._computed_etag(key, path, st, file)
        except BaseException:
            file.close()
            raise
        info = self._info(key, st, etag, sidecar)
        return ObjectReader(info, self._chunks(key, file, st.st_size), file.close)

    def _chunks(self, key: str, file: BinaryIO, size_bytes: int) -> Iterator[bytes]:
        """The open file's bytes, exactly the ``size_bytes`` it had when opened (the length a download announced)."""
        left = size_bytes
        with self._os_errors(key):
            while left:
                chunk = file.read(min(READ_CHUNK_BYTES, left))
                if not chunk:
                    raise ObjectStoreError(
                        f"{key!r} in {self.root} shrank while it was read", key=key, bucket=self._bucket
                    )
                left -= len(chunk)
                yield chunk

    def head(self, key: str) -> ObjectInfo:
        path = self._path(key)
        with self._os_errors(key):
            st = self._stat_file(key, path)
            sidecar = self._matching_sidecar(key, st)
            etag = sidecar["etag"] if sidecar else self._computed_etag(key, path, st)
        return self._info(key, st, etag, sidecar)

    def put(
        self,
        key: str,
        data: bytes,
        *,
        content_type: str,
        metadata: Mapping[str, str] | None = None,
        if_absent: bool = False,
        if_match: str | None = None,
    ) -> ObjectInfo:
        return self._put(key, io.BytesIO(data), content_type, metadata, if_absent=if_absent, if_match=if_match)

    def put_file(
        self, key: str, path: Path, *, content_type: str, metadata: Mapping[str, str] | None = None
    ) -> ObjectInfo:
        with open(path, "rb") as source:  # outside _os_errors: a missing source file is the caller's bug, not 404
            return self._put(key, source, content_type, metadata)

    def _put(
        self,
        key: str,
        source: BinaryIO,
        content_type: str,
        metadata: Mapping[str, str] | None,
        *,
        if_absent: bool = False,
        if_match: str | None = None,
    ) -> ObjectInfo:
        path = self._path(key)
        user_metadata = normalize_metadata(metadata)
        with self._os_errors(key):
            self._make_parent(key, path)
            tmp_data, etag = self._write_temp(source, durable=True)
            try:
                st = os.stat(tmp_data)
                sidecar = {
                    "etag": etag,
                    "content_type": content_type,
                    "user_metadata": user_metadata,
                    "identity": list(_identity(st)),
                }
                if if_absent or if_match is not None:
                    with file_lock(path):  # conditional writers of one folder, one at a time (and across processes)
                        self._check_condition(key, if_absent, if_match)
                        self._write_sidecar(key, sidecar)
                        self._land(key, tmp_data, path, exclusive=if_absent)
                else:
                    # Sidecar first: until the data rename lands, the new sidecar names a file readers cannot see yet.
                    self._write_sidecar(key, sidecar)
                    self._land(key, tmp_data, path, exclusive=False)
            finally:
                tmp_data.unlink(missing_ok=True)
        return self._info(key, st, etag, sidecar)

    def _check_condition(self, key: str, if_absent: bool, if_match: str | None) -> None:
        """``PreconditionFailed`` unless the object is absent (``if_absent``) or exists with ETag ``if_match``."""
        if if_absent and self.exists(key):
            raise PreconditionFailed(f"{key!r} already exists in {self.root}", key=key, bucket=self._bucket)
        if if_match is not None and (not self.exists(key) or self.head(key).etag != if_match):
            raise PreconditionFailed(f"{key!r} in {self.root} is not ETag {if_match}", key=key, bucket=self._bucket)

    def list(self, prefix: str = "", *, suffix: str | None = None) -> Iterator[ObjectInfo]:
        validate_list_prefix(prefix)  # here, not in the generator: a bad prefix fails at the call
        return self._list(prefix, suffix)

    def _list(self, prefix: str, suffix: str | None) -> Iterator[ObjectInfo]:
        start = self.root / prefix.rpartition("/")[0]
        if not start.is_dir():
            return
        with self._os_errors(prefix):  # sorted as AWS lists, so runs over a folder are reproducible
            keys = sorted(self._walk_keys(start, prefix, suffix or ""), key=lambda k: k.encode("utf-8"))
        for key in keys:
            path = self.root / key
            try:
                with self._os_errors(key):
                    st = self._stat_file(key, path)
                    sidecar = self._matching_sidecar(key, st)
                    etag = sidecar["etag"] if sidecar else self._computed_etag(key, path, st)
            except ObjectNotFound:
                logger.debug("%s: %r is gone (deleted while listing) or not a file (a link)", self, key)
                continue
            # Content type and user metadata are left out, as in an S3 listing (see storage.base).
            yield ObjectInfo(key, st.st_size, etag, _modified_at(st))

    def delete(self, key: str) -> None:
        path = self._path(key)
        with self._os_errors(key):
            try:
                path.unlink(missing_ok=True)
            except (IsADirectoryError, NotADirectoryError):  # a folder, or under a file: no such object, as on S3
                return
            self._sidecar_path(key).unlink(missing_ok=True)
        self._computed_etags.pop(key, None)
        # Empty parent folders stay: removing them would race with a concurrent put into the same folder.

    def _path(self, key: str) -> Path:
        if _is_bookkeeping(validate_key(key)):
            raise InvalidKey(key, f"{HIDDEN_DIR}/ is reserved for the local store's bookkeeping")
        path = self.root / key
        if os.path.realpath(path) != os.path.join(self._real_root, key):
            raise ObjectNotFound(
                f"{key!r} in {self.root} is or lies under a symbolic link, which is never followed",
                key=key,
                bucket=self._bucket,
            )
        return path

    def _sidecar_path(self, key: str) -> Path:
        if len(f"{key.rpartition('/')[2]}.json".encode()) > _MAX_NAME_BYTES:
            return self._long_meta_root / f"{hashlib.sha256(key.encode('utf-8')).hexdigest()}.json"
        return self._meta_root / f"{key}.json"

    def _info(self, key: str, st: os.stat_result, etag: str, sidecar: dict | None) -> ObjectInfo:
        return ObjectInfo(
            key=key,
            size_bytes=st.st_size,
            etag=etag,
            last_modified=_modified_at(st),
            content_type=sidecar["content_type"] if sidecar else _guess_content_type(key),
            user_metadata=dict(sidecar["user_metadata"]) if sidecar else {},
        )

    def _stat_file(self, key: str, path: Path) -> os.stat_result:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode):
            raise ObjectNotFound(
                f"{key!r} in {self.root} is not a file (a folder or a link)", key=key, bucket=self._bucket
            )
        return st

    def _matching_sidecar(self, key: str, st: os.stat_result) -> dict | None:
        try:
            sidecar = json.loads(self._sidecar_path(key).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        return sidecar if tuple(sidecar["identity"]) == _identity(st) else None

    def _computed_etag(self, key: str, path: Path, st: os.stat_result, opened: BinaryIO | None = None) -> str:
        """The MD5 of the file (``opened``, which is rewound after, when the caller holds it open), cached by
        identity."""
        identity = _identity(st)
        cached = self._computed_etags.get(key)
        if cached and cached[0] == identity:
            return cached[1]
        digest = hashlib.md5()
        with (
            nullcontext(opened) if opened is not None else open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb")
        ) as file:
            while chunk := file.read(READ_CHUNK_BYTES):
                digest.update(chunk)
            file.seek(0)
        self._computed_etags[key] = (identity, digest.hexdigest())
        return digest.hexdigest()

    def _walk_keys(self, start: Path, prefix: str, suffix: str) -> Iterator[str]:
        for folder, subfolders, files in os.walk(start, onerror=_raise):
            if Path(folder) == self.root and HIDDEN_DIR in subfolders:
                subfolders.remove(HIDDEN_DIR)
            relative = Path(folder).relative_to(self.root).as_posix()
            for name in files:
                key = name if relative == "." else f"{relative}/{name}"
                if _is_bookkeeping(key) or not (key.startswith(prefix) and key.endswith(suffix)):
                    continue
                if not is_valid_key(key):
                    logger.warning("%s: skipping %r, whose name cannot be an object key", self, key)
                    continue
                yield key

    def _make_parent(self, key: str, path: Path) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError) as exc:
            raise InvalidKey(key, "a folder in this key is already an object in this local store") from exc

    def _land(self, key: str, source: Path, target: Path, *, exclusive: bool) -> None:
        """Move the written file to its key: replacing what is there, or (``exclusive``) a hard link that fails when
        anything is, even a writer that took no lock."""
        try:
            if exclusive:
                os.link(source, target)
            else:
                os.replace(source, target)
        except FileExistsError as exc:
            raise PreconditionFailed(f"{key!r} already exists in {self.root}", key=key, bucket=self._bucket) from exc
        except IsADirectoryError as exc:
            raise InvalidKey(key, "this key is a folder of other objects in this local store") from exc

    def _write_temp(self, source: BinaryIO, *, durable: bool) -> tuple[Path, str]:
        """``source`` copied chunk by chunk into a new temporary file; its path and the hex MD5 of the bytes."""
        self._tmp_dir.mkdir(parents=True, exist_ok=True)
        tmp = self._tmp_dir / uuid.uuid4().hex
        digest = hashlib.md5()
        # os.open with 0o666 lets the umask decide permissions, as for any other file the user writes.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            with os.fdopen(fd, "wb") as file:
                while chunk := source.read(READ_CHUNK_BYTES):
                    digest.update(chunk)
                    file.write(chunk)
                file.flush()
                if durable:
                    os.fsync(file.fileno())
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return tmp, digest.hexdigest()

    def _write_sidecar(self, key: str, sidecar: dict) -> None:
        target = self._sidecar_path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        # Not fsynced: a sidecar lost in a crash only costs the metadata check above, never wrong data.
        tmp, _ = self._write_temp(io.BytesIO(json.dumps(sidecar).encode("utf-8")), durable=False)
        try:
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)

    @contextmanager
    def _os_errors(self, key: str) -> Iterator[None]:
        """Translate file-system errors into the store's error tree, once for every operation."""
        try:
            yield
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError) as exc:
            raise ObjectNotFound(f"no object {key!r} in {self.root}", key=key, bucket=self._bucket) from exc
        except PermissionError as exc:
            raise AccessDenied(f"permission denied for {key!r} in {self.root}", key=key, bucket=self._bucket) from exc
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # O_NOFOLLOW met a link that appeared after the check
                raise ObjectNotFound(f"{key!r} in {self.root} is a link", key=key, bucket=self._bucket) from exc
            if exc.errno == errno.ENAMETOOLONG:
                raise InvalidKey(key, f"a name in it is longer than the file system under {self.root} allows") from exc
            raise ObjectStoreError(f"{exc.strerror} for {key!r} in {self.root}", key=key, bucket=self._bucket) from exc


def _is_bookkeeping(key: str) -> bool:
    return key.split("/", 1)[0] == HIDDEN_DIR


def _raise(exc: OSError) -> None:
    """``os.walk`` ignores unreadable folders by default; a listing must fail instead of silently shrinking."""
    raise exc


def _identity(st: os.stat_result) -> _Identity:
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _modified_at(st: os.stat_result) -> datetime:
    return datetime.fromtimestamp(st.st_mtime_ns / 1e9, tz=UTC)


def _guess_content_type(key: str) -> str:
    return mimetypes.guess_type(key, strict=False)[0] or _FALLBACK_CONTENT_TYPE
