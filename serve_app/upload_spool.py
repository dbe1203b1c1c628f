"""An upload's bytes as they arrive, never held whole: hashed (SHA-256) as they come, kept in memory up to
``PORTRAIT_UPLOAD_MEMORY_BYTES`` (8 MiB) and in a temporary file beyond it, in ``PORTRAIT_UPLOAD_TMP_DIR`` (the
system's temporary folder by default). The file is deleted when the request is done with it (:func:`upload_spool`),
whether it was accepted, refused, or its client left.

Writes are gathered into batches of ``WRITE_BATCH_BYTES`` and hashed and written in a worker thread, so the event loop
never blocks on a disk or on hashing a large batch.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import tempfile
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from serve_app.byte_caps import SNIFF_BYTES
from serve_app.settings import Settings

WRITE_BATCH_BYTES = 1 << 20
FILE_PREFIX = "portrait-upload-"


@dataclass(frozen=True)
class SpooledBody:
    """An upload received whole: its size, SHA-256, first bytes, and its bytes in memory (``data``) or in a
    temporary file (``path``), which lives as long as its :func:`upload_spool`."""

    size_bytes: int
    sha256: bytes
    head: bytes  # the first SNIFF_BYTES (fewer in a shorter upload): what tells its kind
    data: bytes | None = None
    path: Path | None = None

    @classmethod
    def of(cls, data: bytes) -> SpooledBody:
        """Bytes already in memory (a stored ``input``, a test)."""
        return cls(len(data), hashlib.sha256(data).digest(), data[:SNIFF_BYTES], data=data)

    @property
    def content(self) -> bytes | Path:
        """What a store writes: the bytes, or the file to stream them from."""
        if self.path is not None:
            return self.path
        assert self.data is not None
        return self.data

    def read(self) -> bytes:
        """The whole upload in memory: only for what is small (a photo checked by its reader)."""
        return self.path.read_bytes() if self.path is not None else (self.data or b"")


class UploadSpool:
    """Receives one upload: :meth:`write` as bytes arrive (or :meth:`absorb` from a worker thread), then
    :meth:`finish`; :meth:`close` deletes its file."""

    def __init__(self, folder: Path | None, memory_bytes: int) -> None:
        self._folder = folder
        self._memory_bytes = memory_bytes
        self._digest = hashlib.sha256()
        self._memory = bytearray()
        self._pending = bytearray()
        self._head = b""
        self._size = 0
        self._fd: int | None = None
        self._lock = threading.Lock()  # a batch being written in a thread, and close() on the loop
        self.path: Path | None = None
        self.closed = False

    @property
    def size_bytes(self) -> int:
        return self._size + len(self._pending)

    async def write(self, data: bytes) -> None:
        self._pending += data
        if len(self._pending) >= WRITE_BATCH_BYTES:
            await self._flush()

    async def _flush(self) -> None:
        if self._pending:
            batch, self._pending = bytes(self._pending), bytearray()
            await asyncio.to_thread(self.absorb, batch)

    def absorb(self, data: bytes) -> None:
        """Take ``data`` now (blocking: hashes, and writes to the file once past the memory threshold)."""
        with self._lock:
            if self.closed:
                raise RuntimeError("the upload spool is closed")
            self._digest.update(data)
            if len(self._head) < SNIFF_BYTES:
                self._head += data[: SNIFF_BYTES - len(self._head)]
            self._size += len(data)
            if self._fd is None and self._size > self._memory_bytes:
                self._open_file()
                self._write_all(self._memory)
                self._memory = bytearray()
            if self._fd is None:
                self._memory += data
            else:
                self._write_all(data)

    async def finish(self) -> SpooledBody:
        """The upload, once every byte has been written."""
        await self._flush()
        if self._fd is None:
            return SpooledBody(self._size, self._digest.digest(), self._head, data=bytes(self._memory))
        assert self.path is not None
        return SpooledBody(self._size, self._digest.digest(), self._head, path=self.path)

    def close(self) -> None:
        """Delete the file (and drop the bytes); later writes fail. Safe to call again."""
        with self._lock:
            self.closed = True
            self._memory = bytearray()
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            if self.path is not None:
                self.path.unlink(missing_ok=True)

    def _open_file(self) -> None:
        folder = self._folder
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=FILE_PREFIX, dir=folder)
        self._fd, self.path = fd, Path(name)

    def _write_all(self, data: bytes | bytearray) -> None:
        assert self._fd is not None
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]


@asynccontextmanager
async def upload_spool(settings: Settings) -> AsyncIterator[UploadSpool]:
    """A spool for one upload, its temporary file deleted on the way out, however the request ends."""
    spool = UploadSpool(settings.upload_tmp_dir, settings.upload_memory_bytes)
    try:
        yield spool
    finally:
        spool.close()
