"""The one object-store interface, its records, and how a location string becomes a store.

Both implementations (``LocalStore``, ``S3Store``) follow the same specification, checked by one shared test suite:

- keys are relative POSIX paths checked by ``storage.keys.validate_key`` (bad keys raise ``InvalidKey`` before any I/O);
- ``etag`` is the hex MD5 of the content without quotes for single-part writes, as S3 reports it;
- user metadata keys are lowercase ASCII and values printable ASCII (what S3 headers carry), 2 KiB in all;
- ``list`` yields objects with ``content_type=None`` and empty ``user_metadata``, because S3 listings do not carry
  them (call ``head`` when they are needed), in no promised order: AWS sorts by UTF-8 bytes, but SeaweedFS lists a
  "folder" ``in/`` before the object ``in.jpg``;
- ``delete`` of a missing key succeeds, as on S3;
- ``open_read`` describes the object (or fails: ``ObjectNotFound``...) before the first byte is read, then hands its
  bytes out chunk by chunk, so a download can decide its status and headers first and never holds the object whole;
- ``put`` may be conditional, as S3's ``If-None-Match: *`` / ``If-Match: <etag>``: exactly one of many writers racing
  on ``if_absent`` wins, the others get ``PreconditionFailed`` (the base of create-once records such as the jobs
  API's idempotency keys); ``if_match`` of a missing object fails the same way.
"""

from __future__ import annotations

import abc
import os
import re
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import BinaryIO, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from deployments.common.errors import InvalidParameter
from storage.errors import ObjectNotFound, PreconditionFailed
from storage.keys import normalize_prefix

MAX_METADATA_BYTES = 2048
READ_CHUNK_BYTES = 1 << 20  # one read of a streamed object: what a stream holds in memory
_METADATA_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*")
_METADATA_VALUE = re.compile(r"[\x20-\x7e]*")
_BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")

RetryMode = Literal["standard", "adaptive"]


@dataclass(frozen=True)
class ObjectInfo:
    """What a store knows about one object; ``key`` is relative to the store (its prefix removed)."""

    key: str
    size_bytes: int
    etag: str
    last_modified: datetime  # timezone-aware
    content_type: str | None = None
    version_id: str | None = None
    user_metadata: dict[str, str] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class StoredObject:
    """An object read whole, together with its description."""

    data: bytes
    info: ObjectInfo


class ObjectReader:
    """An object opened for reading: ``info`` at once, then its bytes chunk by chunk (``READ_CHUNK_BYTES`` at most
    each). The file or response body is released when the bytes run out, when reading fails, or on ``close`` (a
    download whose client went away); iterating a closed reader yields nothing."""

    def __init__(self, info: ObjectInfo, chunks: Iterator[bytes], release: Callable[[], None]) -> None:
        self.info = info
        self._chunks = chunks
        self._release = release
        self.closed = False

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        if self.closed:
            raise StopIteration
        try:
            return next(self._chunks)
        except BaseException:  # the end (StopIteration) or a failed read: nothing more will be read
            self.close()
            raise

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._release()

    def __enter__(self) -> ObjectReader:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


@runtime_checkable
class ObjectStore(Protocol):
    """A flat namespace of keys to bytes: a bucket (with an optional prefix) or a local folder."""

    def get(self, key: str, *, max_bytes: int) -> StoredObject:
        """Read the object, raising ``ObjectTooLarge`` before reading more than ``max_bytes``."""
        ...

    def get_to(self, key: str, handle: BinaryIO, *, max_bytes: int) -> ObjectInfo:
        """Stream the object into ``handle`` chunk by chunk (never whole in memory), ``ObjectTooLarge`` past
        ``max_bytes``."""
        ...

    def open_read(self, key: str) -> ObjectReader:
        """Open the object for a streamed read: its description now (errors such as ``ObjectNotFound`` raised here,
        before any byte), its bytes as the reader is iterated; the caller closes the reader (``with``)."""
        ...

    def head(self, key: str) -> ObjectInfo:
        """Describe the object without reading it; ``ObjectNotFound`` when absent."""
        ...

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
        """Write the object whole; readers see the old or the new content, never a mix. ``if_absent``: only if no
        object has the key; ``if_match``: only if the object's ETag is this one (else ``PreconditionFailed``)."""
        ...

    def put_file(
        self, key: str, path: Path, *, content_type: str, metadata: Mapping[str, str] | None = None
    ) -> ObjectInfo:
        """``put`` of the bytes of the file at ``path``, streamed from it chunk by chunk (never whole in memory): a
        large result (a video) costs no memory of its size. The same object, ETag and description as ``put``."""
        ...

    def list(self, prefix: str = "", *, suffix: str | None = None) -> Iterator[ObjectInfo]:
        """Objects whose key starts with ``prefix`` (a plain string prefix) and ends with ``suffix``."""
        ...

    def exists(self, key: str) -> bool:
        """Whether the object exists."""
        ...

    def delete(self, key: str) -> None:
        """Remove the object; a missing object is not an error."""
        ...


class StoreSettings(BaseModel):
    """How to reach S3-compatible stores; no credentials means the standard AWS credential chain.

    The one S3 connection model: a bucket route's ``store:``, the runner's ``sqs:`` (which extends it), the backfill
    CLI and the model store all use it.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    endpoint_url: str | None = None
    region: str | None = None
    access_key: str | None = None
    secret_key: SecretStr | None = None
    max_attempts: int = Field(5, ge=1, le=20)
    retry_mode: RetryMode = "standard"
    connect_timeout_s: float = Field(5.0, gt=0)
    read_timeout_s: float = Field(30.0, gt=0)

    @property
    def secret(self) -> str | None:
        return self.secret_key.get_secret_value() if self.secret_key else None


@dataclass(frozen=True)
class Location:
    """Where objects live: ``s3://bucket/prefix`` or a local folder (``bucket`` is then its absolute path)."""

    scheme: Literal["s3", "file"]
    bucket: str
    prefix: str = ""

    def __str__(self) -> str:
        if self.scheme == "file":
            return self.bucket
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"


class HeadExists(abc.ABC):
    """``exists`` in terms of ``head``, for stores without a cheaper existence check."""

    @abc.abstractmethod
    def head(self, key: str) -> ObjectInfo: ...

    def exists(self, key: str) -> bool:
        try:
            self.head(key)
        except ObjectNotFound:
            return False
        return True


def parse_location(uri: str) -> Location:
    """Parse ``s3://bucket[/prefix]``, ``file:///abs/path`` or a plain (relative or absolute) folder path."""
    if not uri:
        raise InvalidParameter("empty storage location")
    if uri.startswith("s3://"):
        # Split by hand: S3 keys may legally contain "?" and "#", which urlparse would cut off.
        bucket, _, prefix = uri[len("s3://") :].partition("/")
        if not _BUCKET_NAME.fullmatch(bucket):
            raise InvalidParameter(f"invalid S3 bucket name {bucket!r} in {uri!r}", details={"location": uri})
        return Location("s3", bucket, normalize_prefix(prefix))
    if uri.startswith("file:"):
        parsed = urllib.parse.urlparse(uri)
        if parsed.netloc not in ("", "localhost") or not parsed.path.startswith("/"):
            raise InvalidParameter(f"file URI must name an absolute local path: {uri!r}", details={"location": uri})
        return Location("file", os.path.abspath(urllib.parse.unquote(parsed.path)))
    if re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", uri):
        raise InvalidParameter(f"unsupported storage scheme in {uri!r}", details={"location": uri})
    return Location("file", os.path.abspath(os.path.expanduser(uri)))


def open_store(location: Location | str, settings: StoreSettings | None = None) -> ObjectStore:
    """The store for ``location``; ``settings`` apply to S3 locations only."""
    # Imported here: the implementations import this module, and boto3 loads only when an S3 location is used.
    from storage.local import LocalStore
    from storage.s3 import S3Store

    where = parse_location(location) if isinstance(location, str) else location
    if where.scheme == "file":
        return LocalStore(where.bucket)
    s3 = settings or StoreSettings()
    return S3Store(
        where.bucket,
        where.prefix,
        endpoint_url=s3.endpoint_url,
        region=s3.region,
        access_key=s3.access_key,
        secret_key=s3.secret,
        max_attempts=s3.max_attempts,
        retry_mode=s3.retry_mode,
        connect_timeout_s=s3.connect_timeout_s,
        read_timeout_s=s3.read_timeout_s,
    )


def normalize_metadata(metadata: Mapping[str, str] | None) -> dict[str, str]:
    """User metadata as S3 stores it (lowercase names), refusing what an HTTP header cannot carry unchanged."""
    normalized = {name.lower(): value for name, value in (metadata or {}).items()}
    for name, value in normalized.items():
        if not _METADATA_NAME.fullmatch(name):
            raise InvalidParameter(f"invalid metadata name {name!r}", details={"name": name})
        if not isinstance(value, str) or not _METADATA_VALUE.fullmatch(value) or value != value.strip():
            raise InvalidParameter(
                f"metadata {name!r} must be printable ASCII without surrounding spaces", details={"name": name}
            )
    total_bytes = sum(len(name) + len(value) for name, value in normalized.items())
    if total_bytes > MAX_METADATA_BYTES:
        raise InvalidParameter(
            f"user metadata has {total_bytes} bytes, more than {MAX_METADATA_BYTES}",
            details={"size_bytes": total_bytes},
        )
    return normalized


def enforces_conditional_writes(store: ObjectStore, probe_key: str) -> bool:
    """Whether ``store`` refuses a second ``put(if_absent=True)`` of one key. An S3 server that ignores
    ``If-None-Match`` (older MinIO) answers 200 and overwrites, so claims resting on it would all win. Writes, then
    deletes, ``probe_key``."""
    store.put(probe_key, b"{}", content_type="application/json", if_absent=True)
    try:
        store.put(probe_key, b"{}", content_type="application/json", if_absent=True)
    except PreconditionFailed:
        return True
    finally:
        store.delete(probe_key)
    return False
